"""Moved to `surfer.fleet.cluster` (surfer.apps.MOVED): this old path is an alias for one release."""

from surfer.apps import moved

moved(__name__)

"""Moved to `surfer.qa` (surfer.apps.MOVED): the old paths of the modules
users import (pytest_plugin, suite, runner) are aliases for one release."""

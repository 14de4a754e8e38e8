"""Contracts shared by every layer: actions, observations, coordinates, errors.

`agent`, `tools` and `models` all depend on these; these depend on nothing
else in surfer.
"""

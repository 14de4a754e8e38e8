"""Profile registry: every module in this package that defines `PROFILE` is a
profile, so adding a family is one file (plus its test)."""

from __future__ import annotations

import importlib
import pkgutil

from surfer.core.errors import ConfigError

from .base import Profile, Sampling, point_schema

DEFAULT_PROFILE = "holotron"


def _discover() -> dict[str, Profile]:
    found: dict[str, Profile] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        profile = getattr(module, "PROFILE", None)
        if isinstance(profile, Profile):
            found[profile.name] = profile
    return dict(sorted(found.items()))


PROFILES: dict[str, Profile] = _discover()


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(f"unknown profile {name!r}; choose one of: {', '.join(PROFILES)}") from None


__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile", "Sampling", "get_profile", "point_schema"]

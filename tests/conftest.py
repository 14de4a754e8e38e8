"""Shared fixtures: fixture sites on 127.0.0.1, the stand-in model server,
and the demo site's measured layout. No test talks to the internet."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from surfer.apps.demo import DEMO_SITE
from surfer.apps.static_site import StaticSite
from surfer.models.standin import StandInServer

PAGES = Path(__file__).with_name("pages")


@pytest.fixture(scope="session")
def demo_site() -> Iterator[StaticSite]:
    with StaticSite(DEMO_SITE) as site:
        yield site


@pytest.fixture(scope="session")
def pages() -> Iterator[StaticSite]:
    """tests/pages served over HTTP."""
    with StaticSite(PAGES) as site:
        yield site


@pytest.fixture
def standin() -> Iterator[Callable[..., StandInServer]]:
    """Factory: standin(responder, **options) -> a started StandInServer."""
    servers: list[StandInServer] = []

    def make(respond, **options) -> StandInServer:  # type: ignore[no-untyped-def]
        server = StandInServer(respond, **options).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()

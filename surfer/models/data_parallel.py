"""The data-parallel ranks of one endpoint: a vLLM server started with
`--data-parallel-size N` or an SGLang one with `--dp-size N` (`surfer serve
--gpus N --data-parallel`) holds N copies of the model behind one URL, and
spreads the requests over them without regard to sessions (SGLang round
robin, vLLM the least loaded engine). A session's cached prefix — for a
hybrid model, its state, kept only where its last request ended — is then
lost on most steps. Both engines take a rank per request, so surfer keeps
each session on one.

How many ranks an endpoint has is asked once per endpoint (and event loop),
when its backend is checked before a run: vLLM's /metrics carries one series
per engine (label `engine="K"`), SGLang's /server_info its `dp_size` (which
engine a server is, its /models says; any other server is not asked). A probe
that fails or is not answered in time means no rank is sent; it never fails
a run. With two ranks or more, each model session takes the rank with the
fewest live sessions on its first request there (as servers.py places
sessions on servers), keeps it for every request of its run — policy,
localizer, validator; chat completions and SGLang's /generate alike — and
gives it back when it ends (affinity.py). The rank goes as the
`X-Data-Parallel-Rank` header (vLLM's chat and completions, SGLang's chat) and,
on SGLang's /generate, as the body's `routed_dp_rank`.

    await count_ranks_at(base_url, engine, json_client)   # once per endpoint: 2
    rank = rank_for(session, base_url)                # the session's rank there (None: one rank)
"""

from __future__ import annotations

import asyncio
import logging
import re
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .tokens_in import server_root

log = logging.getLogger(__name__)

RANK_HEADER = "X-Data-Parallel-Rank"  # vLLM reads X-data-parallel-rank, SGLang x-data-parallel-rank: headers ignore case
RANK_FIELD = "routed_dp_rank"  # SGLang's /generate body
PROBE_TIMEOUT = 3.0  # seconds for each probe request
_ENGINE_LABEL = re.compile(r'^vllm:[A-Za-z_:]+\{[^}]*\bengine="(\d+)"')

GetText = Callable[[str], Awaitable[str]]  # GET an absolute URL: the page's text
GetJson = Callable[[str], Awaitable[Any]]  # GET an absolute URL: the decoded JSON answer


def engines_in_metrics(text: str) -> int:
    """The number of vLLM engines a /metrics page has series for (0: none named)."""
    return len({match.group(1) for line in text.splitlines() if (match := _ENGINE_LABEL.match(line.strip()))})


async def count_ranks(root: str, engine: str | None, get_text: GetText, get_json: GetJson) -> int:
    """The data-parallel ranks of the server at `root` (its URL without /v1): vLLM's engines in its /metrics,
    SGLang's `dp_size` in its /server_info (`engine`: what its /models says it is). 0 where neither says (no
    such page, no answer in PROBE_TIMEOUT, an engine without data parallelism), and for any other server
    (a hosted API is not asked for pages it does not have)."""
    if engine not in ("vllm", "sglang"):
        return 0
    if engine == "vllm":
        try:
            return engines_in_metrics(await asyncio.wait_for(get_text(root + "/metrics"), PROBE_TIMEOUT))
        except Exception as exc:  # noqa: BLE001 - any failure of the probe: no rank is sent
            log.debug("%s/metrics did not say its data-parallel ranks: %r", root, exc)
            return 0
    try:
        info = await asyncio.wait_for(get_json(root + "/server_info"), PROBE_TIMEOUT)
    except Exception as exc:  # noqa: BLE001
        log.debug("%s/server_info did not say its data-parallel ranks: %r", root, exc)
        return 0
    size = info.get("dp_size") if isinstance(info, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0


@dataclass
class RankHold:
    """A session's rank at one endpoint, until it is given back."""

    ranks: "EndpointRanks"
    rank: int
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.ranks.sessions[self.rank] -= 1


class EndpointRanks:
    """One endpoint's data-parallel ranks (see the module docstring): how many, and the live sessions on each."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.size: int | None = None  # None: not asked yet; 0 or 1: no rank is sent
        self.sessions: list[int] = []
        self._probe: asyncio.Task[int] | None = None

    async def probe(self, engine: str | None, get_text: GetText, get_json: GetJson) -> int:
        """The number of ranks, asked once (concurrent callers share the one probe); never raises."""
        if self.size is None:
            if self._probe is None:
                self._probe = asyncio.get_running_loop().create_task(count_ranks(self.root, engine, get_text, get_json))
            size = await asyncio.shield(self._probe)
            self._probe = None
            if self.size is None:
                self.size = size
                self.sessions = [0] * size
                if size > 1:
                    log.info("%s has %d data-parallel ranks: each session is kept on one", self.root, size)
        return self.size

    def take(self) -> RankHold:
        """The rank with the fewest live sessions (the lowest of those), held by a new session."""
        rank = min(range(len(self.sessions)), key=lambda k: (self.sessions[k], k))
        self.sessions[rank] += 1
        return RankHold(self, rank)


_RANKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, EndpointRanks]] = weakref.WeakKeyDictionary()


def ranks_of(base_url: str) -> EndpointRanks:
    """The ranks of the endpoint at `base_url`, as this event loop knows them (a server restarted with another
    size between two runs of a process is asked again)."""
    root = server_root(base_url)
    known = _RANKS.setdefault(asyncio.get_running_loop(), {})
    if root not in known:
        known[root] = EndpointRanks(root)
    return known[root]


async def count_ranks_at(base_url: str, engine: str | None, client: Any) -> int:
    """The ranks of the endpoint at `base_url`, asked once through `client` (its JsonClient, json_http.py)."""
    return await ranks_of(base_url).probe(engine, lambda url: client.text(url, PROBE_TIMEOUT),
                                          lambda url: client.request("GET", url, PROBE_TIMEOUT))


def rank_for(session: Any, base_url: str) -> int | None:
    """The data-parallel rank `session` (a ModelSession: its `ranks`, one hold per endpoint) keeps at
    `base_url`: taken on its first request there; None where the endpoint has fewer than two ranks, or
    was not asked yet."""
    ranks = ranks_of(base_url)
    if not ranks.size or ranks.size < 2:
        return None
    hold = session.ranks.get(ranks.root)
    if hold is None or hold.released or hold.ranks is not ranks:
        hold = session.ranks[ranks.root] = ranks.take()
    return int(hold.rank)

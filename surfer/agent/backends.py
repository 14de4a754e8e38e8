"""The model backends a configuration asks for, per role: a role with an endpoint
of its own (`[localizer] base_url = ...`) keeps it; the others use the shared
endpoint, or, with several servers (`servers = [...]`), one placed backend
that sends each session's calls to its server (surfer/models/affinity.py).
Roles that ask one endpoint share one backend (one connection pool, and the
role continuation that needs it). The roles on the shared model (no `model` or
`base_url` of their own) follow the session's policy: in a batch told to use
an adapter (`policy = "name@version"`), their calls go to that adapter."""

from __future__ import annotations

from surfer.models.backend import ModelBackend

from .config import ROLE_NAMES, AgentConfig


def role_backends(
    config: AgentConfig, *, profile: str | None = None, max_inflight: int | None = None,
    local_node: set[str] | None = None,
) -> dict[str, ModelBackend]:
    """A backend per role (see the module docstring), each capped at `max_inflight` requests in flight.
    `profile`: the servers the sessions placed here may use (None: any); `local_node`: this Ray node's
    names (servers of other nodes are left out)."""
    from functools import partial

    from surfer.models.affinity import PlacedBackend
    from surfer.models.http import OpenAICompatibleBackend
    from surfer.models.limits import InflightLimit

    made: dict[str, ModelBackend] = {}
    out: dict[str, ModelBackend] = {}
    for role in ROLE_NAMES:
        settings = getattr(config, role)
        follows = not settings.model and not settings.base_url  # on the shared model: an adapter serves it
        backend: ModelBackend
        if config.placed(role):
            key = f"placed|{settings.model}|{settings.api_key}"
            if key not in made:
                backend = PlacedBackend(config.server_specs(), partial(OpenAICompatibleBackend, follows_policy=follows),
                                        config.server_placement, model=settings.model, api_key=settings.api_key,
                                        profile=profile, local_node=local_node)
        else:
            endpoint = config.endpoint(role)
            key = f"{endpoint.model_dump_json()}|{follows}"
            if key not in made:
                backend = OpenAICompatibleBackend(endpoint, follows_policy=follows)
        if key not in made:
            made[key] = InflightLimit(backend, max_inflight) if max_inflight else backend
        out[role] = made[key]
    return out

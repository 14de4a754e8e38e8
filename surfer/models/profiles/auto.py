"""`--profile auto`: suggest a profile from the model names an endpoint
serves, and always say why (never a silent guess). The suggestion reads
names only, so `surfer calibrate` is the way to confirm the coordinate frame.

    name, reason = suggest_profile(["Hcompany/Holo2-8B"])
    name, reason = await suggest_profile_for_endpoint("http://127.0.0.1:8000/v1")
"""

from __future__ import annotations

import re

from surfer.core.errors import ConfigError, ModelServerUnreachable
from surfer.core.surface import caller
from surfer.models.endpoint import shown_url

# (pattern over a lower-cased model id, profile, family named in the reason)
FAMILY_PATTERNS: tuple[tuple[str, str, str], ...] = (
    (r"holotron", "holotron", "Holotron"),
    (r"holo-?2(?![0-9])", "holo2", "Holo2"),
    (r"holo-?1[._-]5", "holo1.5", "Holo1.5"),
    (r"holo-?1(?![0-9._-]5)", "holo1.5", "Holo1 (JSON output in Holo1.5's frame)"),
    # the published bases, as servers name them: Qwen/Qwen3-VL-8B-Instruct, a local path ending in one,
    # quantised (-AWQ, -FP8), Ollama's qwen3-vl:8b and qwen2.5vl:7b
    (r"qwen[-_]?3[-_.]?vl", "qwen3-vl", "Qwen3-VL"),
    (r"qwen[-_]?2[._-]?5[-_.]?vl", "holo1.5", "Qwen2.5-VL (Holo1.5's base: its image sizes and pixel frame)"),
)
FALLBACK = "openai"
# What to do about a guessed frame; `surfer calibrate` passes its own (it is the check).
CHECK_FRAME = "run `surfer calibrate` to check the coordinate frame"


def suggest_profile(model_ids: list[str], model: str | None = None, *, advice: str = CHECK_FRAME) -> tuple[str, str]:
    """(profile name, reason) for the served `model_ids` (or just `model`, when given); a reason for the
    generic fallback ends with `advice`."""
    names = [model] if model else list(model_ids)
    if not names:
        return FALLBACK, f"the endpoint lists no models; using the generic 'openai' profile — {advice}"
    for name in names:
        lowered = name.lower()
        for pattern, profile, family in FAMILY_PATTERNS:
            if re.search(pattern, lowered):
                return profile, f"model {name!r} looks like {family}; using profile {profile!r}"
    listed = ", ".join(repr(n) for n in names)
    return FALLBACK, (
        f"no known family in {listed}; using the generic 'openai' profile "
        f"(absolute pixels, longest side 1280) — {advice}"
    )


def _auto() -> str:
    """How the caller asked for it: `--profile auto` on the command line, `profile="auto"` in Python."""
    return "--profile auto" if caller() == "cli" else 'profile="auto"'


async def suggest_profile_for_endpoint(
    base_url: str, model: str | None = None, api_key: str = "EMPTY", timeout: float = 10.0,
) -> tuple[str, str]:
    """Ask the endpoint's `/v1/models` what it serves, then `suggest_profile`.
    The model path vLLM reports as `root` counts as a name too."""
    import openai

    from surfer.models.json_http import openai_client

    client = openai_client(base_url=base_url, api_key=api_key or "EMPTY", timeout=timeout, max_retries=0)
    try:
        page = await client.models.list()
    except openai.APIConnectionError as exc:
        raise ModelServerUnreachable(f"{_auto()}: cannot reach {shown_url(base_url)} to list its models ({exc.__cause__ or exc})") from None
    except openai.APIStatusError as exc:
        from surfer.models.endpoint import Endpoint
        from surfer.models.json_http import HttpStatusError
        from surfer.models.refusals import key_refused, server_gone

        refusal = HttpStatusError(exc.status_code, str(exc.body.get("message") if isinstance(exc.body, dict) else exc.message))
        if exc.status_code in (401, 403):  # the key, not the profile, is what to fix
            raise ConfigError(f"{_auto()}: {key_refused(Endpoint(base_url=base_url, api_key=api_key or 'EMPTY'), refusal)}") from None
        if server_gone(refusal):
            raise ModelServerUnreachable(f"{_auto()}: the model server at {shown_url(base_url)} is not ready: /models answered "
                                         f"HTTP {exc.status_code} ({refusal.message}); run again once it answers") from None
        raise ConfigError(f"{_auto()}: {shown_url(base_url)}/models answered HTTP {exc.status_code}; choose {'--profile' if caller() == 'cli' else 'Agent(profile=...)'} explicitly") from None
    finally:
        await client.close()
    ids: list[str] = []
    for entry in page.data:
        if model and entry.id != model:
            continue
        ids.append(entry.id)
        root = getattr(entry, "root", None)
        if root and root != entry.id:
            ids.append(root)
    if model and not ids:
        ids = [model]
    return suggest_profile(ids)

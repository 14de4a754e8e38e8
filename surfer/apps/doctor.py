"""`surfer doctor`: one line per check, each failure with its fix.

Local checks: Chromium found and launchable, a display for desktop use, the
optional extras, a GPU. With `--base-url`/`--model`: the endpoint answers,
serves the model, and honours structured outputs — a tiny request whose
schema allows exactly one reply a model would not produce by chance — whether
it returns token ids and logprobs (what `--record-tokens` needs), and
which engine it is (vLLM or SGLang) and whether it runs with the serving
flags the profile needs (a warning names each one missing), and how many
data-parallel ranks it has where it has several (each session is kept on one). vLLM
answers parameters it ignores with 200, so only the reply's content proves
the schema was applied.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Optional

import typer

from .doctor_machine import Check, check_chromium, check_display, check_extras, check_gpu

MARKS = {"ok": "[green]✓[/green]", "fail": "[red]✗[/red]", "warn": "[yellow]![/yellow]", "skip": "[dim]-[/dim]"}

# The only value that satisfies PROBE_SCHEMA: enum fields a model would not guess.
PROBE_ANSWER = {"ok": True, "n": 7, "word": "zebra-41"}
PROBE_SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean", "enum": [True]},
        "n": {"type": "integer", "enum": [7]},
        "word": {"type": "string", "enum": ["zebra-41"]},
    },
    "required": ["ok", "n", "word"],
    "additionalProperties": False,
}
PROBE_PROMPT = "Reply with a JSON object."
PROBE_TOKENS = 200  # room for whitespace a grammar allows between the fields

async def check_serving(base_url: str, model: str | None, profile_name: str | None) -> list[Check]:
    """Which engine serves, and whether it was started with what the profile needs (surfer/apps/serve/checks.py)."""
    from surfer.apps.serve.checks import ENGINE_NAMES, read_serving, sglang_findings, vllm_findings
    from surfer.models.profiles import get_profile
    from surfer.models.profiles.auto import suggest_profile

    engine, settings, served_len = await read_serving(base_url, model)
    if engine is None:
        return [Check("engine", "skip", "no /metrics page: which engine serves, and how, is unknown",
                      "vLLM serves /metrics; start SGLang with --enable-metrics (`surfer serve --engine sglang` does)")]
    checks = [Check("engine", "ok", f"{ENGINE_NAMES[engine]} (its /metrics)")]
    name = profile_name if profile_name not in (None, "auto") else suggest_profile([model or ""])[0]
    profile = get_profile(name)
    length = profile.serving.max_model_len
    if engine == "sglang":
        missing = sglang_findings(settings, profile, length) if settings else ["/server_info did not answer"]
    else:
        missing = vllm_findings(settings, profile, served_len, length)
    fix = f"serve it with `surfer serve MODEL --profile {profile.name} --engine {engine}`, or pass these flags"
    if missing:
        checks.append(Check("serving flags", "warn", f"for {profile.name}: " + "; ".join(missing), fix))
    else:
        checks.append(Check("serving flags", "ok", f"what {profile.name} needs on {ENGINE_NAMES[engine]}"))
    return checks


async def check_data_parallel(endpoint: Any) -> list[Check]:
    """A server with several data-parallel ranks says so, and that each session is kept on one
    (surfer/models/data_parallel.py); nothing for one rank."""
    from surfer.models.data_parallel import count_ranks
    from surfer.models.json_http import JsonClient
    from surfer.models.tokens_in import server_root

    client = JsonClient(endpoint.base_url, endpoint.api_key, 10.0)
    try:
        try:  # which engine it is, as a run reads it: its /models' owned_by
            cards = (await client.request("GET", "models", 10.0)).get("data") or []
            engine = next((str(c["owned_by"]) for c in cards if isinstance(c, dict) and c.get("owned_by")), None)
        except Exception:  # noqa: BLE001 - the endpoint check says why the server does not answer
            return []
        ranks = await count_ranks(server_root(endpoint.base_url), engine, lambda url: client.text(url, 10.0),
                                  lambda url: client.request("GET", url, 10.0))
    finally:
        await client.aclose()
    return [Check("data parallel", "ok", f"{ranks} data-parallel ranks; each session kept on one")] if ranks > 1 else []


async def check_request_path(endpoint: Any, probe: bool = True) -> Check:
    """Which path surfer's requests take at `endpoint` — tokens in (SGLang's /generate) or chat completions —
    and why (surfer/models/tokens_in.py); for tokens in, with `probe`, whether the server takes token ids with
    a screenshot (SGLang's processor for some models does not: such requests then go by chat)."""
    from surfer.core.errors import ConfigError, ModelRequestError
    from surfer.models.backend import ImagePart, Message, ModelRequest, TextPart
    from surfer.models.http import OpenAICompatibleBackend

    backend = OpenAICompatibleBackend(endpoint.model_copy(update={"max_retries": 0, "server_wait": 0}))
    try:
        try:
            path = await backend.choose_path()
        except ConfigError as exc:
            return Check("request path", "fail", str(exc), "set tokens_in = auto or off, or `tokenizer` to the model's directory", True)
        if not path.tokens_in or not probe:
            return Check("request path", "ok", path.reason)
        request = ModelRequest((Message("user", (ImagePart(_probe_png(), "image/png"), TextPart(PROBE_PROMPT))),),
                               "doctor", PROBE_SCHEMA, 0.0, 8)
        try:
            await backend.complete(request)
        except ModelRequestError as exc:
            return Check("request path", "warn", f"{path.reason}, but a request with a screenshot failed ({exc})",
                         "check the server log, or set tokens_in = off")
        if backend.path is not None and not backend.path.tokens_in:
            return Check("request path", "warn", f"{path.reason}; but {backend.path.reason}: requests with screenshots go by chat",
                         "serve it with `surfer serve MODEL --engine sglang` (for Holotron it loads surfer's processor, "
                         "which takes token ids with images), or set tokens_in = off")
        return Check("request path", "ok", f"{path.reason}; token ids with a screenshot accepted")
    finally:
        await backend.aclose()


def _probe_png() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 64), "white").save(out, "PNG")
    return out.getvalue()


async def check_endpoint(base_url: str, model: str | None, api_key: str = "EMPTY", timeout: float = 60.0) -> list[Check]:
    import openai

    from surfer.models.endpoint import shown_url
    from surfer.models.json_http import JsonClient, one_line, openai_client

    base = base_url.rstrip("/")
    shown = shown_url(base)  # (a password in the URL as ***)
    client = openai_client(base_url=base, api_key=api_key or "EMPTY", timeout=timeout, max_retries=0)
    try:
        try:
            raw = await client.models.with_raw_response.list()
        except openai.APITimeoutError:  # (an APIConnectionError too) connected, but no answer: not "start the server"
            return [Check("endpoint", "fail", f"{shown}/models took the connection but did not answer within {timeout:g} s",
                          "check the server log: it is there but stalled (a wedged process, a proxy without its server)", True)]
        except openai.APIConnectionError as exc:
            if "certificate verify failed" in str(exc.__cause__ or exc).lower():
                return [Check("endpoint", "fail", f"{shown}: its TLS certificate is not trusted here ({exc.__cause__ or exc})",
                              "give the certificate of its CA with SSL_CERT_FILE=/path/to/ca.pem", True)]
            return [Check("endpoint", "fail", f"cannot reach {shown}/models ({exc.__cause__ or exc})",
                          "start the server (`surfer serve MODEL`) or fix --base-url", True)]
        except openai.APIStatusError as exc:
            return [Check("endpoint", "fail", f"{shown}/models answered HTTP {exc.status_code}",
                          (exc.status_code != 404 and _refusal_fix(exc.status_code, api_key))
                          or "check --base-url (it usually ends in /v1) and --api-key", True)]
        try:
            listing = json.loads(raw.http_response.text)
        except ValueError:  # a web page (HTTP 200, HTML), not an API: the SDK would fail to read it
            kind = raw.http_response.headers.get("content-type", "").split(";")[0].strip() or "no content type"
            return [Check("endpoint", "fail", f"{shown}/models answered HTTP {raw.http_response.status_code}, a {kind} answer, "
                          f"not JSON: {one_line(raw.http_response.text, 120)!r}: not an OpenAI-compatible API",
                          "check --base-url (it usually ends in /v1)", True)]
        served = _served_models(listing)
        if served is None:  # JSON of another shape (a list, no `data`, entries without an id): the SDK failed on it
            return [Check("endpoint", "fail", f"{shown}/models answered JSON that is not a model list ({{\"data\": [{{\"id\": "
                          f"...}}]}}): {one_line(raw.http_response.text, 120)!r}: not an OpenAI-compatible API",
                          "check --base-url (it usually ends in /v1)", True)]
        checks = [Check("endpoint", "ok", f"{shown} answers; serves {', '.join(served) or 'no models'}", required=True)]
        if model is None:
            return checks
        if model not in served:
            checks.append(Check("model", "fail", f"{model!r} is not served here", f"use --model {served[0]!r}" if served else "load a model", True))
            return checks
        checks.append(Check("model", "ok", f"{model!r} is listed", required=True))
        # the probes go as a run's requests go (json_http.py): an answer streamed as server-sent events is
        # read, a web page or a refused key is named (the openai SDK raised inside doctor on the first two)
        http = JsonClient(base, api_key, timeout)
        try:
            checks.append(await check_structured_outputs(http, model, api_key, timeout))
            if checks[-1].detail.startswith("the probe request failed"):  # no answer: a second probe would wait as long
                checks.append(Check("token ids", "skip", "not checked: the structured-outputs probe got no answer"))
            else:
                checks.append(await check_token_ids(http, model, timeout))
        finally:
            await http.aclose()
        return checks
    finally:
        await client.close()


def _served_models(listing: Any) -> list[str] | None:
    """The model ids of an OpenAI `/models` answer; None when it is not one."""
    data = listing.get("data") if isinstance(listing, dict) else None
    ok = isinstance(data, list) and all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data)
    return [m["id"] for m in data] if ok else None  # type: ignore[union-attr]


async def _probe(client: Any, model: str, mode: str, timeout: float) -> tuple[int, str, str]:
    """The probe's (status, reply text, finish reason): a 4xx other than 401, 403 and 429 is a refusal of
    the request's form (its status and message); any other failure raises (HttpStatusError, ConnectFailed,
    TimedOut)."""
    from surfer.models.json_http import HttpStatusError
    from surfer.models.replies import reply_text

    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": PROBE_PROMPT}], "temperature": 0,
                            "max_tokens": PROBE_TOKENS}
    if mode == "response_format":
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "doctor", "schema": PROBE_SCHEMA, "strict": True}}
    else:
        body["structured_outputs"] = {"json": PROBE_SCHEMA}
    try:
        response = await client.request("POST", "chat/completions", timeout, body)
    except HttpStatusError as exc:
        if 400 <= exc.status_code < 500 and _refusal_fix(exc.status_code, "") is None:
            return exc.status_code, str(exc)[:200], ""
        raise
    choices = response.get("choices") if isinstance(response, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    # its text read as a run reads it (text parts, a tool call, reasoning alone)
    return 200, reply_text(choice.get("message")), str(choice.get("finish_reason") or "")


def _refusal_fix(status: int, api_key: str) -> str | None:
    """The fix for an answer that says nothing of the request's form: a key refused or wanted (401, 403), a
    rate limit (429), no such model or route (404); None for any other status."""
    if status in (401, 403):
        return ("give the server's API key with --api-key (or SURFER_API_KEY)" if api_key in ("", "EMPTY")
                else "check --api-key: the server refused the key given")
    if status == 429:
        return "the server is rate limiting this key: try again later, or use a key with a higher limit"
    if status == 404:  # (a run says the same: the model, or its chat completions, is not there)
        return "check --model (its /models lists it, but its chat completions do not know it) and --base-url"
    return None


def probe_verdict(text: str, finish_reason: str) -> str:
    """"honoured": the one allowed answer; "cut": stopped at max_tokens, but every
    character so far follows the schema (grammars allow whitespace between
    fields, and a weak or random-weight model may spend its tokens there);
    "ignored": anything else."""
    try:
        if json.loads(text) == PROBE_ANSWER:
            return "honoured"
    except ValueError:
        pass
    compact = "".join(text.split())  # the answer has no whitespace inside its strings
    target = json.dumps(PROBE_ANSWER, separators=(",", ":"))
    if finish_reason == "length" and len(compact) >= 8 and target.startswith(compact):
        return "cut"
    return "ignored"


async def check_structured_outputs(client: Any, model: str, api_key: str = "EMPTY", timeout: float = 60.0) -> Check:
    from surfer.models.json_http import ConnectFailed, HttpStatusError, TimedOut

    replies = []
    for mode in ("response_format", "structured_outputs"):
        try:
            status, text, finish = await _probe(client, model, mode, timeout)
        except HttpStatusError as exc:
            if exc.status_code < 400:  # a success that is no JSON: a web page, a login portal
                return Check("structured outputs", "fail", f"POST /chat/completions answered HTTP {exc.status_code}, "
                             f"{exc.message}: not an OpenAI-compatible API", "check --base-url (it usually ends in /v1)", True)
            return Check("structured outputs", "fail", f"the probe request was refused ({exc})",
                         _refusal_fix(exc.status_code, api_key) or "check the server log", True)
        except (ConnectFailed, TimedOut) as exc:
            return Check("structured outputs", "fail", f"the probe request failed ({exc})", "check the server log", True)
        verdict = probe_verdict(text, finish) if status == 200 else "rejected"
        if verdict in ("honoured", "cut"):
            how = "response_format json_schema" if mode == "response_format" else \
                "vLLM structured_outputs (response_format rejected; surfer falls back to it automatically)"
            cut = f"; the reply was cut at {PROBE_TOKENS} tokens, but all of it follows the schema" if verdict == "cut" else ""
            return Check("structured outputs", "ok", f"honoured via {how}{cut}", required=True)
        replies.append(f"{mode}: HTTP {status} {text[:80]!r}")
        if status == 200:  # accepted but ignored: surfer would not fall back either
            break
    return Check(
        "structured outputs", "fail", "the server does not apply JSON schemas (" + "; ".join(replies) + ")",
        "serve with vLLM's structured outputs (e.g. `--structured-outputs-config '{\"backend\": \"xgrammar\"}'`); "
        "a server that ignores response_format lets malformed actions through", True,
    )


async def check_token_ids(client: Any, model: str, timeout: float = 60.0) -> Check:
    """Whether chat completions return their token ids and logprobs (what `--record-tokens` needs)."""
    from surfer.models.capture import NEEDS, TOKEN_PARAMS, missing_fields
    from surfer.models.json_http import ConnectFailed, HttpStatusError, TimedOut

    fix = f"{NEEDS}; without it, leave --record-tokens off"
    body = {"model": model, "messages": [{"role": "user", "content": "Say OK."}], "temperature": 0, "max_tokens": 1, **TOKEN_PARAMS}
    try:
        response = await client.request("POST", "chat/completions", timeout, body)
    except HttpStatusError as exc:
        return Check("token ids", "warn", f"a request for token ids was refused (HTTP {exc.status_code}: {exc.message[:120]})", fix)
    except (ConnectFailed, TimedOut) as exc:
        return Check("token ids", "warn", f"the probe request failed ({exc})", fix)
    missing = missing_fields(response)  # (content may be text parts)
    if missing:
        return Check("token ids", "warn", f"not returned (no {', '.join(missing)}): --record-tokens cannot be used", fix)
    return Check("token ids", "ok", "prompt and generated token ids with logprobs are returned (--record-tokens)")


def _ids_by_tokens_in() -> Check:
    return Check("token ids", "ok", "returned by the tokens-in path (SGLang's /generate: prompt and generated ids, "
                 "logprobs), so --record-tokens records them (this server's chat completions do not)")


async def run_checks(base_url: str | list[str] | None = None, model: str | None = None, api_key: str = "EMPTY", *,
                     browser: bool = True, profile: str | None = None, servers: list[Any] | None = None,
                     names: dict[int, str] | None = None) -> list[Check]:
    """The local checks, then each server's: `base_url` (one or several, with `model` and `api_key`), or
    `servers` (ServerSpec: each its own model, key and profile). With several, each check's name says
    which server (`server 2: model`, or its name in `names` by number: a role's own endpoint, `localizer`)
    and its detail names the URL."""
    checks: list[Check] = []
    if browser:
        checks.extend(await check_chromium())
    checks.append(check_display())
    checks.extend(await asyncio.to_thread(check_extras))
    checks.append(await asyncio.to_thread(check_gpu))
    urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
    from surfer.models.endpoint import Endpoint, shown_url

    targets = [(s.endpoint.base_url, s.endpoint.model, s.endpoint.api_key, s.profile, s.endpoint) for s in servers or []] or \
        [(url, model, api_key, profile, Endpoint(base_url=url, model=model or "", api_key=api_key)) for url in urls]
    for number, (url, served, key, family, endpoint) in enumerate(targets, 1):
        found = await check_endpoint(url, served, key)
        if not any(c.name == "endpoint" and c.status == "fail" for c in found):
            found.extend(await check_serving(url, served, family))
            found.extend(await check_data_parallel(endpoint))
            path = await check_request_path(endpoint, probe=served is not None)
            found.append(path)
            if path.status == "ok" and path.detail.startswith("tokens in"):  # the ids come back by /generate
                found = [_ids_by_tokens_in() if c.name == "token ids" and c.status != "ok" else c for c in found]
        if len(targets) > 1:
            for check in found:
                check.name = f"{(names or {}).get(number) or f'server {number}'}: {check.name}"
                if shown_url(url).rstrip("/") not in check.detail:
                    check.detail = f"{shown_url(url)}: {check.detail}"
        checks.extend(found)
    return checks


def endpoint_origin(settings: Any, flagged: bool) -> Check | None:
    """Where the endpoint and key checked came from, when any came from the environment (SURFER_* or
    OPENAI_* variables, which `surfer run` reads too); None when nothing did."""
    from surfer.models.endpoint import shown_url

    url = "--base-url" if flagged else settings.origin("base_url")
    key = settings.origin("api_key")
    if url in ("--base-url", "default") and key in ("flags", "default"):
        return None
    said = f"endpoint {shown_url(settings.base_url)} from {url}" if url not in ("--base-url", "default") else "endpoint from --base-url"
    if key not in ("flags", "default"):
        said += f"; API key from {key}"
    return Check("settings", "ok", said)


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        base_url: Optional[list[str]] = typer.Option(
            None, "--base-url", help="OpenAI-compatible endpoint to check, e.g. http://127.0.0.1:8000/v1 (repeat for several servers)."),
        config: Optional[Path] = typer.Option(
            None, "--config", help="Check the servers of this configuration file (`servers = [...]`, or its base_url), and each role's own endpoint ([localizer] base_url ...)."),
        model: str | None = typer.Option(None, "--model", help="Model that should be served there."),
        profile: str | None = typer.Option(
            None, "--profile", help="The model's family, for its serving flags (default, or auto: suggested from --model)."),
        api_key: str = typer.Option("EMPTY", "--api-key", help="API key, if the server wants one."),
        no_browser: bool = typer.Option(False, "--no-browser", help="Skip the Chromium check (e.g. on a GPU box that only serves the model)."),
        as_json: bool = typer.Option(False, "--json", help="Print the checks as one JSON object."),
    ) -> None:
        """Check this machine and a model endpoint: one line per check, with a fix. Exit 1 if a required check fails."""
        from rich.markup import escape

        from surfer.apps import options

        from surfer.core.errors import ConfigError

        try:
            if profile is not None and profile != "auto":  # (auto: suggested from the model's name, as left out)
                from surfer.models.profiles import get_profile

                profile = get_profile(profile).name
            servers, found, names = None, None, {}
            from surfer.agent.config import load_config
            from surfer.models.servers import ServerSpec

            if config is not None:
                if base_url:
                    raise ConfigError("--config and --base-url both name servers: give one of them")
                overrides = {"model": model, "profile": profile, "api_key": api_key if api_key != "EMPTY" else None}
                settings = load_config(config, overrides)
                servers = settings.server_specs()
                for role in ("policy", "localizer", "validator"):  # a role's own endpoint ([localizer] base_url = ...)
                    own = getattr(settings, role)
                    endpoint = settings.endpoint(role)
                    if (own.base_url or own.model) and all((s.endpoint.base_url, s.endpoint.model) != (endpoint.base_url, endpoint.model)
                                                           for s in servers):
                        servers.append(ServerSpec(endpoint, settings.profile))
                        names[len(servers)] = role
            else:
                from surfer.apps.options import check_base_urls

                check_base_urls(base_url)
                # what `surfer run` would use without these flags: SURFER_* or OPENAI_* variables
                settings = load_config(overrides={"api_key": api_key if api_key != "EMPTY" else None, "model": model},
                                       overrides_source="flags")
                api_key, found = settings.api_key, endpoint_origin(settings, bool(base_url))
                if not base_url and settings.origin("base_url") != "default":
                    base_url = [settings.base_url]
                    model = model or (settings.model if settings.origin("model") != "default" else None)
            checks = asyncio.run(run_checks(base_url, model, api_key, browser=not no_browser, profile=profile, servers=servers,
                                            names=names))
            if config is None and found is not None:  # said just before the endpoint's checks
                checks.insert(next((n for n, c in enumerate(checks) if c.name.endswith("endpoint")), len(checks)), found)
        except ConfigError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        ok = not any(c.failed for c in checks)
        if as_json:
            print(json.dumps({"ok": ok, "checks": [asdict(c) for c in checks]}, indent=2))
        else:
            console = options.console(soft_wrap=True)
            for c in checks:
                fix = f"  [dim]fix: {escape(c.fix)}[/dim]" if c.fix and c.status != "ok" else ""
                console.print(f"{MARKS[c.status]} {c.name:<20} {escape(c.detail)}{fix}")
            console.print("[green]all required checks passed[/green]" if ok else "[red]a required check failed[/red]")
        raise typer.Exit(0 if ok else 1)

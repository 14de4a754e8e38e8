"""`surfer policy`: adapters (LoRA) on running model servers, and a running batch's policy.

    surfer policy load web-rl-0007 /ckpt/step-7 --base-url http://a:8000/v1 --base-url http://b:8000/v1
    surfer policy list --config surfer.toml
    surfer policy switch web-rl-0007@7 --out out/      # sessions of the batch in out/ started from now on
    surfer policy unload web-rl-0006 --base-url ...

`load` is all or nothing over the servers (an adapter taken by some is unloaded again when another
fails); `switch` asks the batch running in --out and waits for its answer (policy.jsonl there).
Exit codes: 0 done, 1 no batch answered, 2 refused or bad usage, 3 a server unreachable."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from surfer.apps import options


def _servers(base_url: list[str] | None, config: Path | None, api_key: str | None) -> Any:
    """The endpoints the command acts on: every --base-url, else the configuration's servers."""
    from surfer.models.endpoint import Endpoint

    if base_url:
        from surfer.agent.config import check_server_url

        return [Endpoint(base_url=check_server_url(url), api_key=api_key or "EMPTY") for url in base_url]
    from surfer.agent.config import load_config

    return load_config(config, {"api_key": api_key})


def _run(console: Any, work: Any) -> Any:
    """`work` (a coroutine) with AdapterError as one line: exit 3 when the servers did not answer, else 2."""
    import asyncio

    from surfer.apps.exit_codes import EXIT_UNREACHABLE, EXIT_USAGE
    from surfer.models.adapters import AdapterError

    try:
        return asyncio.run(work)
    except AdapterError as exc:
        options.say(console, "error:", "red", exc)
        raise typer.Exit(EXIT_UNREACHABLE if exc.unreachable else EXIT_USAGE) from None


def _said(console: Any, outcomes: list[Any], verb: str, name: str) -> None:
    from surfer.models.adapters import label

    for n, outcome in enumerate(outcomes, 1):
        options.say(console, f"{label(n, outcome.base_url)}:", "green", outcome.detail or verb)
    options.say(console, f"{verb}:", "bold", f"{name} on {len(outcomes)} server(s)")


def _on_each_server(base_url: list[str] | None, config: Path | None, api_key: str | None, work: Any, verb: str,
                    name: str) -> None:
    """`work(servers)` (a coroutine) on the command's servers, each server's outcome said, then the whole."""
    console = options.console(stderr=True)
    with options.setup_errors(console):
        outcomes = _run(console, work(_servers(base_url, config, api_key)))
    _said(console, outcomes, verb, name)


def register(app: typer.Typer) -> None:
    policy = typer.Typer(name="policy", no_args_is_help=True, rich_markup_mode="rich",
                         help="Adapters (LoRA) on running model servers, and the policy a running batch uses.")
    app.add_typer(policy, name="policy")

    @policy.command("load")
    def load(
        name: str = typer.Argument(..., help="The adapter's name: what requests name as their model."),
        path: str = typer.Argument(..., help="The adapter's directory on the servers' machines (or a hub id)."),
        base_url: options.BaseUrl = None,
        api_key: options.ApiKey = None,
        config: options.ConfigFile = None,
    ) -> None:
        """Load an adapter on every server (all or nothing)."""
        from surfer.fleet import policy as sdk

        _on_each_server(base_url, config, api_key, lambda servers: sdk.load(servers, name, path), "loaded", name)

    @policy.command("unload")
    def unload(
        name: str = typer.Argument(..., help="The adapter's name."),
        base_url: options.BaseUrl = None,
        api_key: options.ApiKey = None,
        config: options.ConfigFile = None,
    ) -> None:
        """Unload an adapter from every server that has it."""
        from surfer.fleet import policy as sdk

        _on_each_server(base_url, config, api_key, lambda servers: sdk.unload(servers, name), "unloaded", name)

    @policy.command("list")
    def list_(
        base_url: options.BaseUrl = None,
        api_key: options.ApiKey = None,
        config: options.ConfigFile = None,
        as_json: bool = typer.Option(False, "--json", help="One JSON object per server on stdout."),
    ) -> None:
        """Each server's models and adapters (adapter: its path on the server)."""
        import json

        from surfer.apps.exit_codes import EXIT_UNREACHABLE
        from surfer.fleet import policy as sdk
        from surfer.models.adapters import label

        console = options.console(stderr=True)
        with options.setup_errors(console):
            listed = _run(console, sdk.adapters(_servers(base_url, config, api_key)))
        for n, server in enumerate(listed, 1):
            if as_json:
                print(json.dumps({"server": server.endpoint.base_url, "engine": server.engine, "models": server.models,
                                  "adapters": server.adapters, "error": server.error}))
            elif server.error:
                options.say(console, f"{label(n, server.endpoint.base_url)}:", "red", server.error)
            else:
                adapters = ", ".join(f"{a} ({p})" for a, p in server.adapters.items()) or "none"
                options.say(console, f"{label(n, server.endpoint.base_url)}:", "bold",
                            f"{server.engine}; models: {', '.join(server.models) or 'none'}; adapters: {adapters}")
        if any(server.error for server in listed):
            raise typer.Exit(EXIT_UNREACHABLE)

    @policy.command("switch")
    def switch(
        policy_name: str = typer.Argument(..., metavar="NAME@VERSION",
                                          help="The adapter (or model) name new sessions use, and its version."),
        out: Path = typer.Option(..., "--out", help="The output directory of the running batch."),
        wait: float = typer.Option(30.0, "--wait", min=0.5, help="Seconds to wait for the batch's answer."),
    ) -> None:
        """Switch a running batch: its sessions started from now on use NAME (it must be loaded on every server)."""
        from surfer.apps.exit_codes import EXIT_FAILED, EXIT_USAGE
        from surfer.fleet.policy import POLICY_FILE, read_answer, request_switch

        console = options.console(stderr=True)
        with options.setup_errors(console):
            request = request_switch(out, policy_name, wait)
        deadline = time.monotonic() + wait
        while (answer := read_answer(out, request)) is None:
            if time.monotonic() > deadline:
                options.say(console, "no answer:", "yellow",
                            f"no batch running in {out} answered within {wait:g} s; nothing was switched")
                raise typer.Exit(EXIT_FAILED)
            time.sleep(0.1)
        if not answer.get("accepted"):
            options.say(console, "refused:", "red", f"{answer.get('error')} (the policy stays {answer.get('kept')})")
            raise typer.Exit(EXIT_USAGE)
        options.say(console, "switched:", "green",
                    f"sessions started from now on use {answer['policy']} (logged in {out / POLICY_FILE})")

"""`surfer serve MODEL`: start a model server (vLLM or SGLang) with the flags a
model family needs, wait until it answers, and print the matching `surfer run`
line.

    surfer serve Hcompany/Holotron-12B                   # the profile's engine (DEFAULT_ENGINE)
    surfer serve Hcompany/Holo2-8B --engine vllm --dry-run
    surfer serve Hcompany/Holo2-8B --lora                # adapters loaded while it runs (surfer policy load)

Each engine's flags come from the profile's `Serving` data (surfer/apps/serve/vllm.py,
surfer/apps/serve/sglang.py) and are checked against the installed engine's help;
a flag that version lacks is left out with a note. Arguments after `--` go to the
engine unchanged (e.g. `-- --load-format dummy`)."""

from __future__ import annotations

import asyncio
from typing import Optional

import typer

from surfer.core.errors import ConfigError

from . import sglang, vllm
from .lora import DEFAULT_MAX_LORAS, DEFAULT_RANK, LoraOptions
from .plan import Capabilities, GpuLayout, ServePlan, given_flags, version_tuple
from .process import batch_line, check_ports, gpu_problem, port_in_use, run_line, serve, serve_replicas, wait_until_ready
from .vllm import (
    DEFAULT_VLLM, FLAG_SINCE, MEASURED_FLAGS, VllmCapabilities, build_command, host_memory_bytes,
    installed_vllm_version, processor_cache_gib, read_capabilities,
)

ENGINES = ("vllm", "sglang")
# The engine `surfer serve` starts for a profile when --engine is not given: the one that measured faster through
# surfer on one H100 (docs: benchmarks, "Engines for the hybrid"). Today's requests, 64 sessions, steady steps/s:
# Holotron 1.83 on vLLM 0.26.0 against 1.22 on SGLang 0.5.15; Holo2 5.13-5.49 on vLLM 0.25.1 against 3.07.
DEFAULT_ENGINE: dict[str, str] = {"holotron": "vllm", "holo2": "vllm", "holo1.5": "vllm", "openai": "vllm"}

__all__ = [
    "DEFAULT_ENGINE", "DEFAULT_VLLM", "ENGINES", "FLAG_SINCE", "MEASURED_FLAGS", "Capabilities", "GpuLayout", "ServePlan",
    "VllmCapabilities", "build_command", "engine_plan", "given_flags", "gpu_problem", "host_memory_bytes",
    "installed_vllm_version", "processor_cache_gib", "read_capabilities", "register", "replica_plans", "run_line", "serve",
    "serve_replicas", "wait_until_ready",
]


def engine_capabilities(engine: str, dry_run: bool, version: str | None, say) -> Capabilities:  # type: ignore[no-untyped-def]
    """The engine's flags: read from the installed engine, or (for --dry-run without it) assumed."""
    if version is not None and not version_tuple(version):  # ("banana" planned for a vLLM with none of the flags)
        default = sglang.DEFAULT_SGLANG if engine == "sglang" else DEFAULT_VLLM
        raise ConfigError(f"--{engine}-version {version!r} is not a version number (e.g. {default})")
    if engine == "sglang":
        installed = sglang.installed_sglang_version()
        if installed is None:
            if not dry_run:
                raise ConfigError(sglang.INSTALL_SGLANG)
            caps: Capabilities = sglang.SglangCapabilities.from_table(version or sglang.DEFAULT_SGLANG)
            say(f"note: SGLang is not installed; flags assume SGLang {caps.version} (surfer/apps/serve/sglang.py)")
            return caps
        return sglang.read_capabilities(installed)
    installed = vllm.installed_vllm_version()
    if installed is None:
        if not dry_run:
            raise ConfigError(vllm.INSTALL_VLLM)
        caps = VllmCapabilities.from_table(version or DEFAULT_VLLM)
        say(f"note: vLLM is not installed; flags assume vLLM {caps.version} (default version table in surfer/apps/serve/vllm.py)")
        return caps
    return vllm.read_capabilities(installed)


def engine_plan(engine: str, model: str, profile, caps: Capabilities, **options) -> ServePlan:  # type: ignore[no-untyped-def]
    if engine == "sglang":
        return sglang.build_command(model, profile, caps, **options)
    return vllm.build_command(model, profile, caps, **options)  # type: ignore[arg-type]


def register(app: typer.Typer) -> None:
    @app.command(name="serve", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def serve_command(
        ctx: typer.Context,
        model: str = typer.Argument(..., help="Model id or local directory, e.g. Hcompany/Holotron-12B."),
        profile: str | None = typer.Option(None, "--profile", help="Model family profile; default (or auto): suggested from the name (said so)."),
        engine: str | None = typer.Option(
            None, "--engine", help="vllm or sglang (default: the profile's faster engine, measured through surfer)."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
        port: int = typer.Option(8000, "--port", help="Port to listen on."),
        max_concurrency: int | None = typer.Option(None, "--max-concurrency", min=1, help="Concurrent sequences (vLLM --max-num-seqs, SGLang --max-running-requests); also sizes vLLM's image cache (default: 64 sessions assumed)."),
        max_model_len: int | None = typer.Option(None, "--max-model-len", min=256, help="Context length (default: the family's)."),
        timeout: float = typer.Option(1800.0, "--timeout", min=1, help="Seconds to wait for the server to answer."),
        prompt_layout: str = typer.Option("window", "--prompt-layout", help="The layout clients will use: blocks and conversation send more images per request."),
        max_images: int | None = typer.Option(
            None, "--max-images", min=1, max=128,
            help="Images one request may hold (default: what --prompt-layout needs with the profile's history); "
            "raise it for clients with a deeper history (memory_images, block_images)."),
        gpus: int = typer.Option(
            1, "--gpus", help="GPUs to serve on: one engine replica per GPU (per --tp GPUs), each on its own port from "
            "--port, with CUDA_VISIBLE_DEVICES; surfer places each session on one (pass every --base-url printed)."),
        tp: int = typer.Option(1, "--tp", help="Tensor parallelism: GPUs per model copy, for a model that does not fit one "
                               "(vLLM --tensor-parallel-size, SGLang --tp-size)."),
        data_parallel: bool = typer.Option(
            False, "--data-parallel", help="With --gpus: one endpoint over the engine's own data parallelism (vLLM "
            "--data-parallel-size, SGLang --dp-size) instead of replicas; surfer keeps each session on one of its ranks."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Print the engine's command (every replica's) and exit."),
        vllm_version: str | None = typer.Option(None, "--vllm-version", help=f"With --dry-run and no vLLM installed: the version to plan for (default {DEFAULT_VLLM})."),
        sglang_version: str | None = typer.Option(None, "--sglang-version", help=f"With --dry-run and no SGLang installed: the version to plan for (default {sglang.DEFAULT_SGLANG})."),
        lora: bool = typer.Option(
            False, "--lora", help="Load and unload adapters (LoRA) while the server runs (`surfer policy load`): vLLM "
            "with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora, SGLang with --enable-lora."),
        adapter: Optional[list[str]] = typer.Option(
            None, "--adapter", metavar="NAME=PATH", help="An adapter to load at the start (implies --lora; repeatable)."),
        max_lora_rank: int = typer.Option(DEFAULT_RANK, "--max-lora-rank", help="With --lora: the largest adapter rank "
                                          "the server takes (vLLM: 1, 8, 16, 32, 64, 128, 256, 320 or 512)."),
        max_loras: int = typer.Option(DEFAULT_MAX_LORAS, "--max-loras", help="With --lora: adapters one batch of the "
                                      "engine may mix (2: the old and the new policy side by side during a switch)."),
    ) -> None:
        """Start vLLM or SGLang for a model with its family's flags, wait until it answers, print the `surfer run` line.

        Arguments after `--` go to the engine unchanged (e.g. `-- --load-format dummy`)."""
        from rich.markup import escape

        from surfer.apps import options

        from surfer.agent.layouts import Layout, check_layout
        from surfer.models.profiles import get_profile
        from surfer.models.profiles.auto import suggest_profile

        console = options.console(stderr=True, soft_wrap=True)
        say = console.print
        try:
            if not model.strip():
                raise ConfigError("the model is empty: name a model id or a local directory, e.g. Hcompany/Holotron-12B")
            if profile is None or profile == "auto":  # (auto, as `surfer run` takes it: the same suggestion)
                profile, reason = suggest_profile([model])
                say(f"profile: {reason} (pass --profile to choose)", markup=False)
            chosen = get_profile(profile)
            if engine is not None and engine not in ENGINES:
                raise ConfigError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
            engine = engine or DEFAULT_ENGINE.get(chosen.name, "vllm")
            # The command line's own mistakes first: a missing engine or GPU said first hid them until both were there.
            layout = GpuLayout(gpus, tp, data_parallel)
            ports = check_ports(port, layout.replicas)
            for flag in sorted({"--host", "--port"} & given_flags(tuple(ctx.args))):  # (the engine's last one wins)
                raise ConfigError(f"{flag} after `--` moves the engine, but surfer waits for it (and prints its URL) "
                                  f"where its own {flag} says: give it before `--`")
            images = max_images or Layout(check_layout(prompt_layout), chosen.max_images).max_images
            if not (lora or adapter):  # (a LoRA setting alone started a server without LoRA, found out at `policy load`)
                for name, flag in (("max_lora_rank", "--max-lora-rank"), ("max_loras", "--max-loras")):
                    if getattr(ctx.get_parameter_source(name), "name", "") == "COMMANDLINE":  # (given, not the default)
                        raise ConfigError(f"{flag} sizes LoRA adapters: add --lora (or --adapter NAME=PATH) to serve them")
            adapters = LoraOptions.parse(adapter, max_lora_rank, max_loras) if lora or adapter else None
            caps = engine_capabilities(engine, dry_run, sglang_version if engine == "sglang" else vllm_version, say)
            plans = replica_plans(
                engine, model, chosen, caps, layout, host=host, port=port, max_concurrency=max_concurrency,
                max_model_len=max_model_len, extra_args=tuple(ctx.args), images=images, lora=adapters,
            )
            if not dry_run:
                problem = gpu_problem(gpus) if gpus > 1 else gpu_problem()
                if problem:
                    raise ConfigError(f"{problem}. Serve on a machine with an NVIDIA GPU, or point surfer at a remote server with --base-url.")
                port_in_use(host, ports)
        except ConfigError as exc:
            say(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(2) from None
        for note in dict.fromkeys(note for plan in plans for note in plan.notes):
            say(f"note: {escape(note)}")
        shown = options.url_host("127.0.0.1" if host in ("0.0.0.0", "::") else host)  # (::1 as http://[::1]:8000/v1)
        base_urls = [f"http://{shown}:{port + n}/v1" for n in range(len(plans))]
        if dry_run:
            for plan in plans:
                print(plan.shell)
            if len(plans) > 1:
                say(f"then: {escape(batch_line(base_urls, model, chosen.name))}")
            return
        for plan in plans:
            plan.command[0:3 if engine == "sglang" else 1] = (
                sglang.sglang_executable() if engine == "sglang" else vllm.vllm_executable())
            say(f"starting: {escape(plan.shell)}")
        try:
            code = asyncio.run(serve_replicas(plans, base_urls, model, chosen.name, timeout,
                                              lambda text: console.print(text, markup=False)))
        except KeyboardInterrupt:
            code = 130
        raise typer.Exit(code)


def replica_plans(engine: str, model: str, profile, caps: Capabilities, layout: GpuLayout, *, port: int,  # type: ignore[no-untyped-def]
                  **options) -> list[ServePlan]:
    """The engine commands for `layout`: one per replica (its port, its GPUs), or one over all the GPUs
    with the engine's data parallelism. One GPU: the plain command, no CUDA_VISIBLE_DEVICES."""
    plans = []
    for replica in range(layout.replicas):
        plan = engine_plan(engine, model, profile, caps, port=port + replica, tensor_parallel=layout.tp,
                           data_parallel=layout.copies if layout.data_parallel else 1, **options)
        if layout.gpus > 1:
            plan.env["CUDA_VISIBLE_DEVICES"] = layout.devices(replica)
        plans.append(plan)
    return plans

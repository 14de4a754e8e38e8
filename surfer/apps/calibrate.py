"""`surfer calibrate`: which coordinate frame does this model really answer in?

Renders a local page with labelled targets at known places, asks the model's
localizer for each (the normal Localizer prompt and HTTP backend, one attempt
per target), and scores every frame hypothesis on the same raw answers:
normalised 0..1000, and absolute pixels of the image sent. A profile whose
frame is beaten by another is reported loudly (exit code 1).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import typer

from surfer.core.errors import CoordinateError, ModelOutputError

# Labelled targets: (label, centre as fractions of the viewport). Spread out,
# away from the top-left corner, so that the frames disagree about every one.
TARGETS: tuple[tuple[str, float, float], ...] = (
    ("Apple", 0.22, 0.18), ("Banana", 0.78, 0.14), ("Cherry", 0.5, 0.42), ("Damson", 0.86, 0.55),
    ("Elder", 0.3, 0.7), ("Fig", 0.64, 0.86), ("Grape", 0.12, 0.9), ("Hazel", 0.93, 0.93),
)
BUTTON = (110, 40)  # CSS px
COLOURS = ("#1565c0", "#2e7d32", "#c62828", "#6a1b9a", "#ef6c00", "#00838f", "#4e342e", "#ad1457")


def target_description(label: str) -> str:
    return f"the button labelled '{label}'"


def calibration_page(viewport: tuple[int, int]) -> str:
    width, height = viewport
    buttons = []
    for (label, fx, fy), colour in zip(TARGETS, COLOURS):
        left, top = fx * width - BUTTON[0] / 2, fy * height - BUTTON[1] / 2
        buttons.append(
            f'<button id="{label}" style="position:absolute;left:{left}px;top:{top}px;width:{BUTTON[0]}px;'
            f'height:{BUTTON[1]}px;background:{colour};color:#fff;font:600 18px sans-serif;border:0;'
            f'border-radius:6px">{label}</button>'
        )
    return f"<html><head><link rel='icon' href='data:,'></head><body style='margin:0;overflow:hidden;background:#fafafa'>{''.join(buttons)}</body></html>"


@dataclass
class TargetResult:
    label: str
    box: tuple[float, float, float, float]  # x, y, width, height in CSS px
    raw: str = ""
    answer: tuple[float, float] | None = None
    error: str = ""
    hits: dict[str, bool] = field(default_factory=dict)


def _inside(point: Any, box: tuple[float, float, float, float]) -> bool:
    x, y, w, h = box
    return x <= point.x <= x + w and y <= point.y <= y + h


async def calibrate(
    base_url: str, model: str, profile_name: str, *, api_key: str = "EMPTY", viewport: tuple[int, int] = (1280, 800),
    scale: float = 1.0,
) -> dict[str, Any]:
    from surfer.agent.roles import Localizer, RoleClient
    from surfer.core.coordinates import FRAMES, model_to_css
    from surfer.models.http import Endpoint, OpenAICompatibleBackend
    from surfer.models.imaging import prepare_image
    from surfer.models.profiles import get_profile
    from surfer.models.schema import parse_json_object
    from surfer.tools.browser import BrowserEnvironment

    profile = get_profile(profile_name)
    backend = OpenAICompatibleBackend(Endpoint(base_url=base_url, model=model, api_key=api_key))
    env = BrowserEnvironment(viewport=viewport, device_scale_factor=scale)
    results: list[TargetResult] = []
    try:
        await backend.check()
        await env.start()
        await env.page.set_content(calibration_page(viewport))
        prepared = await prepare_image((await env.observe()).screenshot, profile.image)
        localizer = Localizer(RoleClient("localizer", backend, profile, output_retries=0))
        for label, _fx, _fy in TARGETS:
            box = await env.page.locator(f"#{label}").bounding_box()
            result = TargetResult(label, (box["x"], box["y"], box["width"], box["height"]))
            calls: list[Any] = []

            async def sink(call: Any, calls: list[Any] = calls) -> None:
                calls.append(call)

            try:
                await localizer.locate(target_description(label), prepared, sink)
            except Exception as exc:  # noqa: BLE001 - the raw answer is judged below, under every frame
                result.error = str(exc)
            result.raw = calls[0].completion if calls else ""
            try:
                result.answer = profile.parse_point(parse_json_object(result.raw))
            except ModelOutputError as exc:
                result.error = str(exc)
            for frame in FRAMES:
                hit = False
                if result.answer is not None:
                    try:
                        hit = _inside(model_to_css(*result.answer, frame, prepared.geometry), result.box)
                    except CoordinateError:
                        hit = False
                result.hits[frame] = hit
            results.append(result)
    finally:
        await env.close()
        await backend.aclose()
    rates = {frame: sum(r.hits[frame] for r in results) for frame in FRAMES}
    best = max(rates.values())
    better = [f for f in FRAMES if rates[f] > rates[profile.frame]]
    sent = prepared.geometry.sent
    return {
        "model": model, "base_url": base_url, "profile": profile.name, "profile_frame": profile.frame,
        "viewport": list(viewport), "scale": scale, "sent": [sent.width, sent.height], "targets": len(results),
        "hits": rates, "best_frames": [f for f in FRAMES if rates[f] == best and best > 0],
        "profile_fits": not better and best > 0, "better_frames": better,
        "results": [asdict(r) for r in results],
    }


def advice(report: dict[str, Any]) -> str:
    from surfer.models.profiles import PROFILES

    own, hits, n = report["profile_frame"], report["hits"], report["targets"]
    if report["better_frames"]:
        frame = report["better_frames"][0]
        fitting = [p.name for p in PROFILES.values() if p.frame == frame]
        return (f"WARNING: frame {frame!r} fits better ({hits[frame]}/{n}) than frame {own!r} of profile "
                f"{report['profile']!r} ({hits[own]}/{n}). Clicks will miss: use a profile with frame {frame!r} "
                f"({', '.join(fitting) or 'add one'}) or fix this profile's frame.")
    if not report["profile_fits"]:
        return (f"WARNING: no frame fits (0/{n} under every hypothesis): the model is not localizing these targets; "
                "check the model, its prompt template and image policy.")
    return f"OK: frame {own!r} of profile {report['profile']!r} fits best ({hits[own]}/{n})."


def register(app: typer.Typer) -> None:
    @app.command(name="calibrate")
    def calibrate_command(
        base_url: str = typer.Option(..., "--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."),
        model: str = typer.Option(..., "--model", help="Model served there."),
        profile: str | None = typer.Option(None, "--profile", help="Profile to check (default, or auto: suggested from the model name, said so)."),
        api_key: str = typer.Option("EMPTY", "--api-key", help="API key, if the server wants one."),
        viewport: str = typer.Option("1280x800", "--viewport", help="Viewport WxH in CSS pixels."),
        scale: float = typer.Option(1.0, "--device-scale-factor", help="Device scale factor."),
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    ) -> None:
        """Find the coordinate frame a model answers in; warn when the profile's frame is not the best fit."""
        from surfer.apps import options
        from surfer.agent.config import parse_viewport
        from surfer.apps.options import check_base_urls
        from surfer.core.errors import ConfigError, RunError
        from surfer.models.profiles.auto import suggest_profile

        console = options.console(stderr=True, soft_wrap=True)
        try:
            size = parse_viewport(viewport)
            check_base_urls(base_url)
            if not 0 < scale <= 4:  # (as the browser settings take it: surfer run refuses the same)
                raise ConfigError(f"--device-scale-factor {scale:g}: give a factor above 0 and at most 4")
        except (ValueError, ConfigError) as exc:
            console.print(f"error: {exc}", markup=False)
            raise typer.Exit(2) from None
        if profile is None or profile == "auto":  # (auto, as `surfer run` takes it: the same suggestion)
            profile, reason = suggest_profile([model], advice="this calibration checks whether that frame fits")
            console.print(f"profile: {reason} (pass --profile NAME to check another profile's frame)", markup=False)
        try:
            report = asyncio.run(calibrate(base_url, model, profile, api_key=api_key, viewport=size, scale=scale))
        except ConfigError as exc:
            console.print(f"error: {exc}", markup=False)
            raise typer.Exit(2) from None
        except RunError as exc:
            console.print(f"error: {exc}", markup=False)
            raise typer.Exit(3) from None
        report["advice"] = advice(report)
        if as_json:
            print(json.dumps(report, indent=2))
        else:
            out = options.console(soft_wrap=True)
            out.print(f"{model} with profile {report['profile']} — {report['targets']} targets, viewport "
                      f"{size[0]}x{size[1]} @{scale:g}, image sent {report['sent'][0]}x{report['sent'][1]}", markup=False)
            for frame, hits in report["hits"].items():
                mark = "  <- profile" if frame == report["profile_frame"] else ""
                out.print(f"  {frame:<16} {hits}/{report['targets']} hits{mark}", markup=False)
            out.print(report["advice"], markup=False)
        raise typer.Exit(0 if report["profile_fits"] else 1)

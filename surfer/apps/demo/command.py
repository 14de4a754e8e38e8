"""`surfer demo`: the whole loop on the bundled demo site, with the oracle
(oracle.py) standing in for the model over real HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


def register(app: Any) -> None:
    import typer

    from surfer.apps import options

    @app.command()
    def demo(
        headful: bool = typer.Option(False, "--headful", help="Show the browser window."),
        profile: str = typer.Option("holotron", "--profile", help="Profile whose wire format the oracle speaks."),
        out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default runs/<timestamp>-<slug>)."),
        viewport_text: str = typer.Option("1280x800", "--viewport", help="Viewport WxH in CSS pixels."),
    ) -> None:
        """Watch the whole loop on the bundled demo site, with a ground-truth oracle
        standing in for the model (over real HTTP): no GPU or model server needed."""

        from surfer.agent.config import AgentConfig, BrowserSettings, parse_viewport
        from surfer.agent.loop import Agent
        from surfer.agent.rundir import claim_run_dir, default_run_dir
        from surfer.apps.demo.oracle import DEMO_SITE, DEMO_TASK, DemoOracle, frame_mapper, measure_targets
        from surfer.apps.demo.static_site import StaticSite
        from surfer.apps.exit_codes import exit_code
        from surfer.apps.live import LiveView
        from surfer.apps.signals import Interrupted, run_interruptible
        from surfer.models.profiles import get_profile
        from surfer.models.standin import StandInServer

        try:
            viewport = parse_viewport(viewport_text)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--viewport") from None
        console = options.console()
        # Checked as `surfer run` checks them, before anything starts (a bad name, a window without a display).
        frame = get_profile(profile).frame
        config = AgentConfig(profile=profile, browser=BrowserSettings(headless=not headful, viewport=viewport))
        options.check_browser(config, console)
        run_dir = claim_run_dir(out or default_run_dir(DEMO_TASK))  # a reused --out is refused: runs never mix

        async def main() -> Any:
            with StaticSite(DEMO_SITE) as site:
                centres = await measure_targets(site.base_url, viewport)
                with StandInServer(DemoOracle(centres, frame_mapper(frame, viewport, 1.0))) as server:
                    served = config.model_copy(update={"base_url": server.base_url, "model": server.model})
                    agent = Agent(served, listeners=[LiveView(console)])
                    try:
                        return await agent.run(DEMO_TASK, site.url("index.html"), out_dir=run_dir)
                    finally:
                        await agent.aclose()

        try:
            result = run_interruptible(main())
        except Interrupted as stop:
            options.say_stopped_run(console, stop, run_dir)
            raise typer.Exit(stop.exit_code) from None
        raise typer.Exit(exit_code(result))

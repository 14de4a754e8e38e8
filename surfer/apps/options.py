"""Command-line options shared by the commands that talk to a model server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

BaseUrl = Annotated[Optional[str], typer.Option(
    "--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 \\[env: SURFER_BASE_URL].")]
Model = Annotated[Optional[str], typer.Option("--model", help="Model name served at the endpoint \\[env: SURFER_MODEL].")]
ApiKey = Annotated[Optional[str], typer.Option("--api-key", help="API key, if the server wants one \\[env: SURFER_API_KEY].")]
Profile = Annotated[Optional[str], typer.Option(
    "--profile", help="Model family profile: holotron, holo2, holo1.5, openai or auto \\[env: SURFER_PROFILE].")]
ConfigFile = Annotated[Optional[Path], typer.Option(
    "--config", help="TOML configuration file (per-role endpoints, limits, browser).")]

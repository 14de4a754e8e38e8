"""MkDocs hook (mkdocs.yml `hooks:`): what the docs build makes from the code.

- `<!-- generate: ... -->` lines in a page become the generated reference
  (reference.py: the CLI, the configuration, the SDK, the file formats);
- the pictures of `surfer view` and of a run's report are made by running the
  bundled demo in real Chromium (screenshots.py) and added to the site as
  `assets/screenshots/*.png`; the build fails when they cannot be made;
- the benchmark data in the repository's `benchmarks/` folder is published as
  `benchmarks/data/...`, so the benchmark pages link the JSON their tables
  came from;
- at the end, every distribution the build imported must come with
  `pip install -e '.[docs]'` (needs.py): the build fails naming what the
  `docs` extra lacks."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import needs  # this folder: mkdocs puts it on sys.path while it imports the hook; first, to note every import
import reference
import screenshots

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

log = logging.getLogger("mkdocs.hooks.surfer_docs")
ROOT = Path(__file__).resolve().parents[2]
PICTURES_DIR = "assets/screenshots"
_pictures: dict[str, bytes] = {}  # made once per process (`mkdocs serve` rebuilds often)


def on_files(files, config):  # type: ignore[no-untyped-def]
    if not _pictures:
        started = time.monotonic()
        try:
            _pictures.update(screenshots.make_pictures())
        except Exception as exc:  # noqa: BLE001 - any failure fails the build, loudly
            raise PluginError(f"surfer docs: the screenshots of the demo could not be made: {exc!r}") from exc
        log.info("surfer docs: screenshots made in %.1f s", time.monotonic() - started)
    for name, data in _pictures.items():
        files.append(File.generated(config, f"{PICTURES_DIR}/{name}", content=data))
    for path in sorted((ROOT / "benchmarks").rglob("*")):
        if path.is_file():
            files.append(File.generated(config, f"benchmarks/data/{path.relative_to(ROOT / 'benchmarks').as_posix()}",
                                        abs_src_path=str(path)))
    return files


def on_page_markdown(markdown, page, config, files):  # type: ignore[no-untyped-def]
    try:
        return reference.expand(markdown)
    except Exception as exc:  # noqa: BLE001
        raise PluginError(f"surfer docs: generating {page.file.src_uri} failed: {exc!r}") from exc


def on_post_build(config):  # type: ignore[no-untyped-def]
    lacking = needs.problem()
    if lacking:
        raise PluginError(f"surfer docs: {lacking}")

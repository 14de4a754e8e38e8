#!/usr/bin/env bash
# Set up everything the tests need on a fresh Debian machine (Python >= 3.11),
# build the documentation (mkdocs build --strict), then run the tests.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The headless shell makes headless sessions ~10x cheaper to open (surfer prefers it).
[ -x /usr/lib/chromium/chromium-headless-shell ] || command -v chromium-headless-shell >/dev/null 2>&1 \
  || need+=(chromium-headless-shell)
command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
command -v xdotool >/dev/null 2>&1 || need+=(xdotool)
python3 -c "import tkinter" >/dev/null 2>&1 || need+=(python3-tk)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test,docs]'
# The documentation site: broken links or anchors, or a reference that cannot be generated, fail here.
NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs build --strict --quiet
# One worker more than the cores, 3 to 5 (pytest-xdist), a whole test file to each: most tests wait on
# a browser, a subprocess or a server, so three at a time finish sooner even on two cores. Tests marked
# `serial` (they time things or load the machine) then run in one process with nothing beside them: run
# among the others, each would first wait for every worker to finish the test in hand.
# SURFER_TEST_WORKERS=0 runs everything in one process.
# Compiled modules are written (__pycache__, ignored by git) even where the environment asks not to (many
# container images set PYTHONDONTWRITEBYTECODE): otherwise every pytest process rewrites every test module's
# asserts again (~6 s each) and every `surfer` process a test starts compiles surfer again.
unset PYTHONDONTWRITEBYTECODE
cpus=$(nproc 2>/dev/null || echo 2)
workers=${SURFER_TEST_WORKERS:-$(( cpus + 1 < 3 ? 3 : cpus + 1 > 5 ? 5 : cpus + 1 ))}
if [ "$workers" = 0 ]; then exec .venv/bin/python -m pytest "$@"; fi
status=0
# The parallel phase names the files of the serial tests it leaves out (tests/conftest.py): the serial phase
# collects only those (pytest drops a path given twice), not every file again; none named, no serial test selected.
serial_files=$(mktemp)
trap 'rm -f "$serial_files"' EXIT
# Files in collection order, the longest first (tests/conftest.py), rather than the most tests first.
SURFER_SERIAL_FILES="$serial_files" .venv/bin/python -m pytest -n "$workers" --dist loadfile --no-loadscope-reorder \
  -m "not serial" "$@" || status=$?
serial=0
mapfile -t files < <(sort -u "$serial_files")
if [ ${#files[@]} -gt 0 ]; then
  .venv/bin/python -m pytest -m serial "$@" "${files[@]}" || serial=$?
fi
[ "$serial" = 5 ] && serial=0  # (a selection with no serial test in it)
[ "$status" = 5 ] && status=0
[ "$status" != 0 ] && exit "$status"
exit "$serial"

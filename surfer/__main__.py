"""`python -m surfer` and the `surfer` script. A browser run starts its browser
here, before the CLI loads (surfer/apps/early_start.py)."""

import sys


def main() -> None:
    from surfer.apps.early_start import begin

    begin(sys.argv[1:])
    from surfer.apps.cli import main as cli_main

    cli_main()


if __name__ == "__main__":
    main()

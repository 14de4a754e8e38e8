"""`python -m surfer` and the `surfer` script. A browser run starts its browser
here, before the CLI loads (surfer/apps/early_start.py)."""

import sys


def main() -> None:
    from surfer.apps import early_start

    early_start.begin(sys.argv[1:])
    try:
        from surfer.apps.cli import main as cli_main

        cli_main()
    finally:  # also when stopped while the CLI loads
        early_start.end()


if __name__ == "__main__":
    main()

"""`python -m surfer` and the `surfer` script. The commands that keep a record
handle stop signals from here on (surfer/apps/signals.py), and a browser run
starts its browser here, before the CLI loads (surfer/apps/early_start.py)."""

import sys

# The commands that keep a record, and what a stop before it began says never started.
RECORDING_COMMANDS = {"run": "the run", "demo": "the run", "batch": "the batch", "qa": "the suite"}


def main() -> None:
    from surfer.apps import output, signals  # (light: the standard library's signal, os, sys, stat, threading and time)

    output.tolerate_encodings()  # a terminal or log that is not UTF-8 gets escapes, not a UnicodeEncodeError
    args = sys.argv[1:]
    command = args[0] if args else ""
    if command in RECORDING_COMMANDS:
        signals.arm(RECORDING_COMMANDS[command], as_json=command == "run" and "--json" in args)
    try:
        from surfer.apps import early_start

        early_start.begin(args)
        try:
            from surfer.apps.cli import main as cli_main

            cli_main()
        finally:  # also when stopped while the CLI loads
            early_start.end()
    except signals.StoppedOutsideRun as stop:  # (one before the run began exits in the handler)
        signals.say(f"stopped by {stop} after {RECORDING_COMMANDS.get(command, 'the command')} ended; its record is kept\n")
        raise SystemExit(stop.exit_code) from None
    except signals.OutputClosed as stop:  # (the CLI's commands exit from it themselves)
        raise SystemExit(stop.exit_code) from None


if __name__ == "__main__":
    main()

"""`surfer demo` and its fixtures: the demo site (demo_site/, served by
static_site.py), its ground-truth oracle model (oracle.py; qa_oracle.py for
the sample QA suite), the recorded runs `--replay demo` plays (demo_runs/),
and the command itself (command.py). Tests and benchmarks use the same
fixtures."""

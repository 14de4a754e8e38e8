"""Every benchmark and its fixtures: throughput (harness steps/s), overhead and
startup, gpu (a vLLM server under load, and the model directories it serves),
prompts (what each step sends), miniwob (success rates, with its oracle), qa
(first run vs cached re-run), cluster (Ray against the local runner) and
charts. Benchmarks print figures and write JSON; tests never time anything.

Nothing outside this package imports it (tests/test_layout.py); the CLI adds
`surfer bench` through the `surfer.commands` entry point (commands.py)."""

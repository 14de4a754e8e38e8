"""`surfer bench gpu`: the harness against a real vLLM server (bench.py), the
load levels (levels.py), starting and stopping a server for it (serving.py),
and the small model directories it serves (models.py)."""

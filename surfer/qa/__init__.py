"""Scripted QA: suites in plain language (`surfer qa`), CI reports, an action
cache that replays passing steps without the model and heals them, and a
pytest plugin. One module per job: suite (files), executor (recording and
secrets), anchors, cache, replay, expectations, runner, outcomes (what a run
found), reports, pytest_plugin. Its command is surfer/apps/qa_command.py, the
sample suite's oracle surfer/apps/demo/qa_oracle.py, its benchmark
surfer/bench/qa.py."""

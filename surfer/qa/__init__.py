"""Scripted QA: suites in plain language (`surfer qa`), CI reports, an action
cache that replays passing steps without the model and heals them, and a
pytest plugin. One module per job: suite (files), executor (recording and
secrets), anchors, cache, replay, expectations, runner, outcomes (what a run
found), reports, cli, pytest_plugin, demo (the sample suite's oracle), bench."""

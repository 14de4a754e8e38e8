"""`surfer batch`: many tasks, many sessions, one browser, one model server.

    surfer batch tasks.jsonl --concurrency 32 --max-inflight 16 --out out/

Each line of the tasks file is one task: {"task": ..., "url": ..., "id": ...,
"max_steps": ..., "max_seconds": ..., "metadata": {...}}. One Chromium runs
every session, each in its own browser context; a bounded pool of sessions
shares one backend per endpoint, capped at `max_inflight` requests in flight.

The output directory holds:

    results.jsonl          one line per finished task, appended as tasks finish
    runs/<id>/             the run directory of each finished task
    runs/.tmp-<id>-<hex>/  run directories in progress (renamed when done)

Running the same command again resumes: tasks with a final status in
results.jsonl are skipped, stale temporary directories are removed, the
rest run. The same from Python: `await run_batch(config, "tasks.jsonl", "out/")`
or `Batch(...).run()`.
"""

from surfer.fleet.browser_pool import SharedBrowser

from .results import BATCH_STOPPING_ERRORS, FINAL_STATUSES, RUNS, TMP_PREFIX, ResultsIndex, is_final
from .placement import make_batch, run_batch
from .runner import BROWSER_DIED, HARD_LIMIT_GRACE, Batch, BatchSummary, drain, shared_backends
from .stats import BatchStats
from .tasks import BatchTask, check_task_urls, expand_samples, load_tasks, run_dir_name

__all__ = [
    "BATCH_STOPPING_ERRORS", "BROWSER_DIED", "FINAL_STATUSES", "HARD_LIMIT_GRACE", "RUNS", "TMP_PREFIX", "Batch",
    "BatchStats", "BatchSummary", "BatchTask", "ResultsIndex", "SharedBrowser", "check_task_urls", "drain",
    "expand_samples", "is_final", "load_tasks", "make_batch", "run_batch", "run_dir_name", "shared_backends",
]

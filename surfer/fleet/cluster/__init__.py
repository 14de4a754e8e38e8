"""`surfer batch --ray`: the batch's sessions spread over a Ray cluster.

The driver (`RayBatch`, runner.py) keeps everything the local runner owns —
the task file, resume, results.jsonl, publishing run directories, the live
statistics — and only changes placement: one long-lived `SessionWorker` actor
per node (worker.py) holds a Chromium and runs its share of `--concurrency`
sessions in it; `--max-inflight` is one `InflightGate` actor (gate.py) for
the whole cluster. Ray is imported only here (`pip install 'surfer-agent[ray]'`).
"""

from surfer.fleet.cluster.runner import RayBatch, connect

__all__ = ["RayBatch", "connect"]

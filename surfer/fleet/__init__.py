"""Many sessions: batches (local or on Ray), concurrency control, the live session files,
rollouts, the shared browser pool."""

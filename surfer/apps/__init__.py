"""Front ends over the core: the CLI (and, later, batch, QA, benchmarks)."""

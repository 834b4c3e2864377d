"""metaopt: a harness-engineering optimizer. Runs agent benchmarks in Docker sandboxes, traces them
into one DuckDB file, and keeps only harness revisions that a statistical gate accepts."""

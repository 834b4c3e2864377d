"""Performance checks that print measured figures: `python -m benchmarks.perf.<name>`."""

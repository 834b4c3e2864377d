"""Performance checks that print measured figures: `python -m perf.<name>`."""

"""The evaluation layer: running trials of tasks, here or on a Ray cluster."""

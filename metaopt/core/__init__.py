"""The bottom of the stack: what every layer may import and nothing here imports metaopt.

- core.errors: who each error is for (user mistakes, per-task failures, systemic failures).
- core.registry: implementations by short name, one registry shape for every kind.
"""

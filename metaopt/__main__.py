"""`python -m metaopt ...` is the `metaopt` command."""

from metaopt.meta_agent.cli import main

main()

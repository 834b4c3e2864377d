"""`python -m metaopt ...` is the `metaopt` command."""

from metaopt.cli import main

main()

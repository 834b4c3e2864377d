from metaopt.cli import main

main()

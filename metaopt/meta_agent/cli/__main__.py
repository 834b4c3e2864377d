from metaopt.meta_agent.cli import main

main()

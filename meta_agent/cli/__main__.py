from meta_agent.cli import main

main()

from infra_cli.cli import main

main()

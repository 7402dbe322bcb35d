from infra_cli.commands.main import main

main()

from infra_cli.commands.main import run

run()

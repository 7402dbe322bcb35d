"""`infra emulator ...` commands."""

from __future__ import annotations

import typer

emulator_app = typer.Typer(help="Run the local Azure emulator.", no_args_is_help=True)


@emulator_app.command("serve")
def serve() -> None:
    """Serve the emulator in the foreground (not built yet)."""
    print("infra emulator serve: not implemented yet")
    raise typer.Exit(1)

"""`infra smoke` command."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def smoke(stack: str = typer.Argument(..., metavar="STACK")) -> None:
        """Run the smoke-test jobs of a stack and judge them (not built yet)."""
        print("infra smoke: not implemented yet")
        raise typer.Exit(1)

"""`infra image ...` commands (thin: parse, call the engine, render, exit code)."""

from __future__ import annotations

import typer

image_app = typer.Typer(help="Inspect container images without a Docker daemon.", no_args_is_help=True)


@image_app.command("check")
def check(image: str = typer.Argument(..., metavar="IMAGE")) -> None:
    """Check that IMAGE carries what MPI/IB jobs need (not built yet)."""
    print("infra image check: not implemented yet")
    raise typer.Exit(2)

"""plan / apply / destroy / import / force-unlock commands."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    pass

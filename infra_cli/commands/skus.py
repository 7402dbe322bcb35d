"""`infra skus`: the catalog of sizes, with live availability from the emulator when asked."""

import json
from typing import Optional

import typer

from infra_cli.commands.cli import Command, no_color_option
from infra_cli.commands.errors import fail
from infra_cli.commands.terminal import print_diagnostics
from infra_cli.diagnostics import Diagnostic, DiagnosticError


def skus(
    location: Optional[str] = typer.Option(None, "--location", metavar="REGION", help="region (live availability needs --local or Azure)"),
    infiniband: bool = typer.Option(False, "--infiniband", help="only sizes whose InfiniBand NCCL/MPI can use"),
    as_json: bool = typer.Option(False, "--json", help="print the sizes as JSON"),
    local: bool = typer.Option(False, "--local", help="ask the local emulator for availability in --location"),
    no_color: bool = no_color_option(),
) -> None:
    """List VM sizes for distributed training from the catalog (validators/skus.yaml)."""
    from infra_cli.commands.views.skus import skus_table
    from infra_cli.knowledge.skus import load_catalog

    try:
        catalog = load_catalog()
    except DiagnosticError as exc:
        raise fail(exc.diagnostics, as_json)
    rows = [s for s in catalog if not infiniband or s.infiniband_eligible]
    available: dict[str, str] | None = None
    if location and local:
        from infra_cli.azure.preflight import availability_workspace, sku_availability
        from infra_cli.commands.backend import build_provider

        try:
            workspace = availability_workspace(location, local=True)
            available = sku_availability(build_provider(workspace, local=True), workspace, [s.name for s in rows])
        except DiagnosticError as exc:
            raise fail(exc.diagnostics, as_json)
    elif location and not catalog.knows_region(location):   # the regions of validators/skus.yaml, offline
        raise fail([Diagnostic(
            "error", "skus.unknown-location", f"{location!r} is not an Azure region (validators/skus.yaml `regions:`)",
            hint="use a region's programmatic name, e.g. eastus, westus3, southcentralus (az account list-locations)")],
            as_json)
    elif location:
        print_diagnostics([Diagnostic("warning", "skus.location-ignored",
                                      f"--location {location} needs --local to ask for availability; "
                                      "showing the catalog", hint="add --local")])
    if as_json:
        out = []
        for s in rows:
            row = s.to_json()
            if available is not None:
                row["availability"] = available.get(s.name.lower(), "not offered")
            out.append(row)
        print(json.dumps(out, indent=2))
    else:
        print(skus_table(rows, available))


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(skus)

"""`infra image ...` commands (thin: parse, call the engine, render, exit code)."""

import json
import sys
from pathlib import Path
from typing import List, Optional

import typer

from infra_cli.commands.cli import Command, Group, no_color_option
from infra_cli.commands.terminal import print_diagnostics
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.image.limits import DEFAULT_TIMEOUT_S

EXIT_MET, EXIT_NOT_MET, EXIT_UNREADABLE = 0, 1, 2


def check(
    image: str = typer.Argument(..., metavar="IMAGE",
                                help="host[:port]/repo[:tag|@digest], docker-archive:PATH or oci:DIR[:TAG]"),
    require: List[str] = typer.Option([], "--require", "-r", metavar="SPEC",
                                      help="e.g. openmpi>=4.1, mpi, ibverbs, mofed, hpcx, ucx, nccl>=2.18 (default: openmpi)"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON"),
    json_out: Optional[Path] = typer.Option(
        None, "--json-out", metavar="FILE",
        help="also write the JSON result to FILE (the text verdict still prints: CI logs and artifacts both)"),
    platform: Optional[str] = typer.Option(
        None, "--platform", metavar="OS/ARCH",
        help="which image of a multi-arch index (default linux/amd64); given, a single-platform image must be it too"),
    insecure: bool = typer.Option(False, "--insecure", help="allow plain http and unverified TLS for this registry"),
    timeout: float = typer.Option(DEFAULT_TIMEOUT_S, "--timeout", metavar="S", min=0.001,
                                  help="bound on the whole check in seconds: connects, token requests, redirects, "
                                       "downloads and reading the layers"),
    no_color: bool = no_color_option(),
) -> None:
    """Check that IMAGE carries what MPI/InfiniBand jobs need, from its layers, with no Docker daemon.

    Exit 0: every requirement met; 1: some not met; 2: the image could not be read (including hostile or
    oversized input, and running out of --timeout).
    """
    from infra_cli.image.check import check_image
    from infra_cli.knowledge.requirements import SpecError, parse_requirement

    try:
        requirements = [parse_requirement(spec) for spec in require or ["openmpi"]]
        result = check_image(image, requirements, platform=platform, insecure=insecure, timeout=timeout,
                             local_paths=True)
    except (SpecError, DiagnosticError) as exc:
        diagnostics = getattr(exc, "diagnostics", None) or [
            Diagnostic("error", "image.require", str(exc), hint="--require NAME or NAME>=VERSION")]
        document = {"reference": image, "ok": False, "errors": [d.to_json() for d in diagnostics]}
        _write_json(json_out, document)
        if as_json:
            print(json.dumps(document, indent=2))
        else:
            print_diagnostics(diagnostics)
        raise typer.Exit(EXIT_UNREADABLE)
    _write_json(json_out, result.to_json())
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        from infra_cli.image.report import format_result

        print(format_result(result), file=sys.stdout)
    raise typer.Exit(EXIT_MET if result.ok else EXIT_NOT_MET)


def _write_json(path: Optional[Path], document: dict) -> None:
    """--json-out: the JSON result as a new file (replaced atomically: a link at FILE is replaced, not followed)."""
    if path is not None:
        from infra_cli.private_state import write_private_file

        write_private_file(path, (json.dumps(document, indent=2) + "\n").encode(), 0o644)


def register(app: typer.Typer) -> None:
    image_app = typer.Typer(cls=Group, help="Inspect container images without a Docker daemon.", no_args_is_help=True)
    image_app.command("check", cls=Command)(check)
    app.add_typer(image_app, name="image")

"""`infra emulator ...` commands. Only typer at import time: the emulator loads inside the command."""

import sys
from pathlib import Path
from typing import Optional

import typer

from infra_cli.commands.cli import Command, Group, no_color_option
from infra_cli.commands.terminal import print_diagnostics


STATE_DIR_HELP = "state directory (default: INFRA_LOCAL_DIR, else .infra/local of the project holding this folder)"


def serve(
    port: int = typer.Option(0, "--port", metavar="PORT", help="port on 127.0.0.1 (0: any free port)", min=0, max=65535),
    directory: Optional[Path] = typer.Option(None, "--dir", metavar="DIR", help=STATE_DIR_HELP),
    world: Optional[Path] = typer.Option(None, "--world", metavar="FILE", help="a world file (regions, restrictions, quota) instead of the built-in one"),
    latency: float = typer.Option(0.0, "--latency", metavar="S", help="seconds added to every management request", min=0.0),
    throttle_rate: float = typer.Option(0.0, "--throttle-rate", metavar="R", help="share of requests answered 429 (0..1)", min=0.0, max=1.0),
    error_rate: float = typer.Option(0.0, "--error-rate", metavar="R", help="share of requests answered 500 (0..1)", min=0.0, max=1.0),
    lro_failure_rate: float = typer.Option(0.0, "--lro-failure-rate", metavar="R", help="share of long-running operations that fail (0..1)", min=0.0, max=1.0),
    provisioning_delay: float = typer.Option(2.0, "--provisioning-delay", metavar="S", help="seconds a compute create/update/delete takes", min=0.0),
    seed: Optional[int] = typer.Option(None, "--seed", metavar="N", help="seed for the injected faults"),
    no_color: bool = no_color_option(),
) -> None:
    """Serve https://127.0.0.1:PORT/ as Azure Resource Manager, Azure ML and blob storage, in the foreground."""
    from infra_cli.emulator.faults import FaultConfig
    from infra_cli.emulator.server import EmulatorServer

    from infra_cli.diagnostics import DiagnosticError
    from infra_cli.paths import local_state_dir   # (subprocess, tempfile...): not for --help

    state_dir = (directory or local_state_dir()).absolute()   # not resolved: a link there is refused, not followed
    try:
        faults = FaultConfig(latency_s=latency, throttle_rate=throttle_rate, error_rate=error_rate,
                             lro_failure_rate=lro_failure_rate, seed=seed, provisioning_delay_s=provisioning_delay)
        server = EmulatorServer(state_dir, port, faults, world=world, hold_directory=True).start()
    except DiagnosticError as exc:    # a state directory others control, a corrupt state file: said as such
        print_diagnostics(exc.diagnostics)
        raise typer.Exit(1)
    except (ValueError, OSError) as exc:
        print(f"error[emulator]: cannot start the emulator: {exc}", file=sys.stderr)
        print("  hint: pick another --port, check --dir is writable and --world is a readable YAML file",
              file=sys.stderr)
        raise typer.Exit(1)
    print(connection_help(server.url, server.cert_path, server.token_path, state_dir), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("emulator stopped", file=sys.stderr)


def reset(
    directory: Optional[Path] = typer.Option(None, "--dir", metavar="DIR", help=STATE_DIR_HELP),
    no_color: bool = no_color_option(),
) -> None:
    """Move the local cloud's state database aside (kept as state.sqlite3.aside-TIME): the next emulator starts empty.
    Refused while any infra process uses the directory: an `infra emulator serve`, or a `--local` command running."""
    from infra_cli.diagnostics import DiagnosticError
    from infra_cli.emulator.server import reset_state
    from infra_cli.paths import local_state_dir

    state_dir = (directory or local_state_dir()).absolute()
    try:
        moved = reset_state(state_dir)
    except DiagnosticError as exc:
        print_diagnostics(exc.diagnostics)
        raise typer.Exit(1)
    except OSError as exc:
        print(f"error[emulator]: cannot move the state of {state_dir} aside: {exc.strerror or exc}", file=sys.stderr)
        raise typer.Exit(1)
    for source, target in moved:
        print(f"moved {source} to {target}")
    if not moved:
        print(f"no emulator state in {state_dir}: nothing to move")


PYTHON_SCRIPT_HEADER = "Python SDKs: this script runs as it is (saved to a file, or pasted into python3):"


def connection_help(url: str, cert: Path, token: Path, state_dir: Path) -> str:
    """What `infra emulator serve` prints: how to reach it, and a Python script that does so with the SDKs
    (tests/test_emulator_serve_banner.py runs it against a served emulator)."""
    return f"""infra local Azure emulator: {url}  (state: {state_dir})
Only the bearer token in {token} (mode 0600) is accepted, on every endpoint; TLS uses a self-signed
certificate clients must trust: {cert}
`infra ... --local` uses this emulator with: export INFRA_EMULATOR_URL={url} INFRA_LOCAL_DIR={state_dir}

{PYTHON_SCRIPT_HEADER}
    import os, time
    os.environ["REQUESTS_CA_BUNDLE"] = "{cert}"   # azure-ai-ml's blob clients (uploads) read it
    import requests
    from azure.ai.ml import MLClient
    from azure.core.credentials import AccessToken
    from azure.mgmt.compute import ComputeManagementClient
    class EmulatorCredential:
        def get_token(self, *scopes, **kwargs):
            return AccessToken(open("{token}").read().strip(), int(time.time()) + 3600)
    credential = EmulatorCredential()
    SUBSCRIPTION_ID, RESOURCE_GROUP, WORKSPACE = "00000000-0000-0000-0000-000000000000", "rg-demo", "mlw-demo"
    # the workspace (`infra ... --local` creates its stack's workspace itself)
    requests.put(f"{url}subscriptions/{{SUBSCRIPTION_ID}}/resourceGroups/{{RESOURCE_GROUP}}/providers/"
                 f"Microsoft.MachineLearningServices/workspaces/{{WORKSPACE}}", params={{"api-version": "2024-10-01-preview"}},
                 json={{"location": "eastus"}}, headers={{"Authorization": "Bearer " + credential.get_token().token}},
                 verify="{cert}", timeout=60).raise_for_status()
    ml = MLClient(credential, SUBSCRIPTION_ID, RESOURCE_GROUP, WORKSPACE, cloud="InfraLocal",
                  cloud_metadata={{"resource_manager": "{url}", "azure_portal": "{url}",
                                  "active_directory": "{url}", "aml_resource_id": "{url}",
                                  "storage_endpoint": "core.windows.net", "registry_discovery_endpoint": "{url}"}},
                  connection_verify="{cert}")
    compute = ComputeManagementClient(credential, SUBSCRIPTION_ID, base_url="{url}", connection_verify="{cert}")
    print(ml.workspaces.get(WORKSPACE).name, [c.name for c in ml.compute.list()],
          len(list(compute.resource_skus.list(filter="location eq 'eastus'"))), "sizes in eastus")

The az CLI presents Azure AD tokens, which the emulator refuses: use the SDKs as above, or `infra --local`.

Ctrl-C stops it; the state stays in {state_dir}."""


def register(app: typer.Typer) -> None:
    emulator_app = typer.Typer(cls=Group, help="Run the local Azure emulator.", no_args_is_help=True)
    emulator_app.command("serve", cls=Command)(serve)
    emulator_app.command("reset", cls=Command)(reset)
    app.add_typer(emulator_app, name="emulator")

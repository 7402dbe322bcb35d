"""The backend, built once per command: which Azure it talks to (Azure's clouds, or the local emulator), the SDK
clients and the provider the engines read and write through.

This is the composition root's one place that builds clients and providers, and the one place the emulator is
wired in: `--local` starts (or reuses, within this process) the emulator over the local state directory, or uses
the one already serving at INFRA_EMULATOR_URL (`infra emulator serve`, whose certificate and token are in the
state directory), makes sure the stack's workspace exists there, and points the same real SDK clients at it
(azure/clients.py). The engines take what is built here and never build their own.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from infra_cli.azure.clients import (DEFAULT_RETRY_TOTAL, AzureClients, EmulatorTarget, azure_clients, local_clients,
                                     workspace_cloud)
from infra_cli.azure.protocol import Provider
from infra_cli.azure.provider import AzureProvider
from infra_cli.conventions import forget_inherited_emulator_cloud
from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.paths import local_state_dir

if TYPE_CHECKING:
    from infra_cli.emulator.faults import FaultConfig
    from infra_cli.emulator.server import EmulatorServer
    from infra_cli.stack.model import Workspace

# `--local` against an already running `infra emulator serve` (its cert.pem and token in INFRA_LOCAL_DIR)
EMULATOR_URL_ENV = "INFRA_EMULATOR_URL"

_emulators: dict[Path, "EmulatorServer"] = {}
_emulators_lock = threading.Lock()


def build_clients(workspace: "Workspace", *, local: bool, local_dir: Path | None = None,
                  retry_total: int = DEFAULT_RETRY_TOTAL, emulator: "EmulatorServer | None" = None,
                  credential: Any = None, anchor: Path | None = None) -> AzureClients:
    """SDK clients for the stack's workspace, in its cloud. local=True: the emulator (`emulator`, or the one this
    process runs over local_dir, default INFRA_LOCAL_DIR or the .infra/local of the project holding `anchor`, the
    stack file; paths.local_state_dir), started on first use, which stands in for whichever cloud the workspace
    names. `credential`: a TokenCredential to use instead of DefaultAzureCredential (Azure only)."""
    forget_inherited_emulator_cloud()
    workspace_cloud(workspace)   # an unknown cloud is said before any emulator starts
    if not local:
        return azure_clients(workspace, retry_total=retry_total, credential=credential)
    if emulator is None and os.environ.get(EMULATOR_URL_ENV):
        target = served_emulator(os.environ[EMULATOR_URL_ENV], Path(local_dir or local_state_dir(anchor)))
        target.ensure_workspace(workspace, retry_total)
    else:
        server = emulator or local_emulator(local_dir or local_state_dir(anchor))
        server.ensure_workspace(workspace.subscription_id, workspace.resource_group, workspace.name,
                                workspace.location)
        target = EmulatorTarget(server.url, server.port, server.cert_path, server.token)
    return local_clients(workspace, target, retry_total=retry_total)


def build_provider(workspace: "Workspace", *, local: bool, credential: Any = None,
                   anchor: Path | None = None) -> Provider:
    """The provider for the stack's workspace (Azure, or the local emulator of the project holding `anchor`)."""
    return AzureProvider(build_clients(workspace, local=local, credential=credential, anchor=anchor))


def provider_for(*, local: bool, credential: Any = None,
                 anchor: Path | None = None) -> Callable[["Workspace"], Provider]:
    """What an engine that loads the stack itself is handed: it asks for the provider once it knows the
    workspace (and only when its checks of the stack passed, so a refused command starts no emulator).
    `anchor`: the stack file, whose project's local cloud `--local` uses."""
    return lambda workspace: build_provider(workspace, local=local, credential=credential, anchor=anchor)


def local_emulator(local_dir: Path | None = None) -> "EmulatorServer":
    """The emulator this process runs over local_dir, started on an ephemeral port on first use."""
    from infra_cli.emulator.server import EmulatorServer
    from infra_cli.emulator.state import STATE_FILE

    state_dir = Path(local_dir or local_state_dir()).absolute()   # not resolved: a link there is refused, not followed
    first_use = not (state_dir / STATE_FILE).exists()   # never made, or moved aside by `infra emulator reset`
    with _emulators_lock:
        server = _emulators.get(state_dir)
        if server is None or not server.running:
            server = EmulatorServer(state_dir, faults=_environment_faults()).start()
            _emulators[state_dir] = server
            atexit.register(server.stop)
    if first_use:   # said once, where the project's local cloud now lives (every later --local here uses it)
        print(f"Local Azure: a new, empty cloud in {state_dir} (this project's; INFRA_LOCAL_DIR puts it elsewhere)",
              file=sys.stderr)
    return server


def _environment_faults() -> "FaultConfig":
    """Fault injection for the in-process emulator, from the INFRA_EMULATOR_* variables."""
    from infra_cli.emulator.faults import fault_config_from_environment

    try:
        return fault_config_from_environment()
    except ValueError as exc:
        raise DiagnosticError([Diagnostic("error", "local.emulator-setting", str(exc), None, None, None,
                                          "unset it, or give a number (rates between 0 and 1)")]) from None


def served_emulator(url: str, local_dir: Path) -> EmulatorTarget:
    """INFRA_EMULATOR_URL: an `infra emulator serve` on this machine, trusted with the certificate and token in
    its state directory (INFRA_LOCAL_DIR). Only a loopback https URL: the token must not leave the machine."""
    from infra_cli.emulator.auth import read_token

    def refuse(message: str, hint: str) -> DiagnosticError:
        return DiagnosticError([Diagnostic("error", "local.emulator-url", message, None, None, None, hint)])

    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "https" or parts.hostname not in ("127.0.0.1", "localhost", "::1") or not port:
        raise refuse(f"{EMULATOR_URL_ENV}={url!r} is not an https URL on this machine with a port",
                     "use the URL `infra emulator serve` printed, like https://127.0.0.1:PORT/")
    state_dir = Path(local_dir).resolve()
    cert = state_dir / "cert.pem"
    same_dir = "set INFRA_LOCAL_DIR to the --dir the emulator serves (where its cert.pem and token are)"
    try:
        token = read_token(state_dir)
    except OSError as exc:
        raise refuse(f"cannot read the emulator's token in {state_dir}: {exc}", same_dir)
    if not cert.is_file():
        raise refuse(f"{cert} does not exist", same_dir)
    # A stopped emulator refuses the connection: say so now, not after the SDKs' retries (about 50 s of them).
    try:
        socket.create_connection((parts.hostname, port), timeout=5).close()
    except OSError as exc:
        raise refuse(f"nothing answers at {EMULATOR_URL_ENV}={url!r}: {exc.strerror or exc}",
                     "start it again with `infra emulator serve --dir DIR` (it prints the URL to export), or unset "
                     f"{EMULATOR_URL_ENV} and --local starts an emulator of its own") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return EmulatorTarget(f"https://{host}:{port}/", port, cert, token)

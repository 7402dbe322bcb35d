"""What a `--local` plan costs before its first request (issue 15: plan <= 0.6 s): the emulator reuses its
certificate without importing cryptography (the expiry is kept in cert.expiry), and the refresh reads the loopback
emulator over http.client (azure/loopback.py), so requests, urllib3 and azure.ai.ml are never imported."""

from __future__ import annotations

import time

import pytest
from azure.core.exceptions import ServiceRequestError

from infra_cli.azure.arm import ArmClient
from infra_cli.azure.clients import retry_policy
from infra_cli.commands.backend import build_clients
from infra_cli.azure.loopback import LoopbackTransport
from infra_cli.emulator.tls import EXPIRY_FILE, ensure_certificate
from test_startup_imports import _imported


def test_a_second_local_plan_imports_no_cryptography_requests_or_azure_ai_ml(tmp_path):
    env = {"INFRA_LOCAL_DIR": str(tmp_path / "local"), "INFRA_EMULATOR_URL": ""}
    # the first makes the certificate (with cryptography), the second only reuses it
    runs = [_imported(tmp_path, "plan", "stacks/ib-a100.yaml", "--local", env=env) for _ in range(2)]
    assert [status for status, _ in runs] == [0, 0]
    modules = runs[1][1]
    assert not {m.split(".")[0] for m in modules} & {"cryptography", "requests", "urllib3", "charset_normalizer"}
    assert not [m for m in modules if m.startswith(("azure.ai.ml", "azure.mgmt"))]


def test_certificate_is_reused_while_its_expiry_is_ahead_and_remade_otherwise(tmp_path):
    from cryptography import x509

    cert, key = ensure_certificate(tmp_path)
    first = cert.read_bytes()
    expiry = tmp_path / EXPIRY_FILE
    # the stored expiry is the certificate's own notAfter
    assert float(expiry.read_text()) == x509.load_pem_x509_certificate(first).not_valid_after_utc.timestamp()
    assert ensure_certificate(tmp_path) == (cert, key) and cert.read_bytes() == first
    for damage in (lambda: expiry.unlink(), lambda: expiry.write_text("not a time"),
                   lambda: expiry.write_text(f"{time.time() + 3600:.0f}")):  # within the day's renewal margin
        before = cert.read_bytes()
        damage()
        ensure_certificate(tmp_path)
        assert cert.read_bytes() != before
        assert float(expiry.read_text()) > time.time() + 300 * 86400


def test_the_local_reader_uses_http_client_and_reads_what_the_emulator_serves(emulator, test_workspace):
    clients = build_clients(test_workspace, local=True, emulator=emulator)
    assert isinstance(clients.arm._client._pipeline._transport, LoopbackTransport)
    path = (f"subscriptions/{test_workspace.subscription_id}/resourceGroups/{test_workspace.resource_group}/providers/"
            f"Microsoft.MachineLearningServices/workspaces/{test_workspace.name}")
    emulator.stats.reset()
    found = [clients.arm.get(path, "2024-04-01") for _ in range(3)]
    assert found[0]["name"] == test_workspace.name and found[0] == found[2]
    assert clients.arm.get(path + "/computes/absent", "2024-04-01") is None  # a 404 is None, as before
    assert emulator.stats.total == 4
    # a query with a space is sent quoted, as requests sends it (the registry's "$orderBy=createdtime desc")
    assert clients.arm.list(path + "/computes", "2024-04-01", **{"$orderBy": "createdtime desc"}) == []


def test_an_unreachable_emulator_is_a_service_request_error(tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    from infra_cli.azure.credentials import LocalCredential

    reader = ArmClient(f"https://127.0.0.1:{port}/", LocalCredential("t"), retry_policy(0, "local"))
    with pytest.raises(ServiceRequestError):
        reader.get("subscriptions/x", "2024-04-01")

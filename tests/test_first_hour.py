"""The first hour of a Terraform user: what infra says when no Azure credential is set up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from azure.core.exceptions import ClientAuthenticationError
from azure.core.pipeline.transport import HttpRequest

from infra_cli.commands.output import report_error

ROOT = Path(__file__).resolve().parent.parent


def _no_credential_env(home: Path) -> dict:
    """No credential of DefaultAzureCredential's chain can work, and none reaches past this machine: no
    service-principal variables, an empty home (no az, azd or shared token cache), no az on PATH, and the
    managed identity pointed at a closed loopback port instead of the instance metadata address."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "AZUREML_", "MSI_", "IDENTITY_"))}
    keep.update(HOME=str(home), PATH=os.path.dirname(sys.executable) + ":/usr/bin:/bin",
                IDENTITY_ENDPOINT="http://127.0.0.1:9/msi", IDENTITY_HEADER="x", MSI_ENDPOINT="http://127.0.0.1:9/msi")
    return keep


def test_no_credential_is_one_short_message_naming_the_ways_in(tmp_path):
    r = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(ROOT / "stacks" / "ib-a100.yaml")],
                       capture_output=True, text=True, env=_no_credential_env(tmp_path), cwd=tmp_path, timeout=300)
    assert r.returncode == 1
    lines = (r.stdout + r.stderr).strip().splitlines()
    assert len(lines) <= 6, "\n".join(lines)
    text = "\n".join(lines)
    assert "az login" in text and "AZURE_CLIENT_ID" in text and "--local" in text and "INFRA_DEBUG=1" in text
    assert "Azure refused" not in text and "Traceback" not in text


def test_the_chain_is_behind_infra_debug(capsys, monkeypatch):
    monkeypatch.setenv("INFRA_DEBUG", "1")
    report_error(ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token.\n"
                                           "Attempted credentials:\n\tAzureCliCredential: Azure CLI not found"))
    err = capsys.readouterr().err
    assert "AzureCliCredential: Azure CLI not found" in err and "az login" in err


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_azure_answered_is_still_azures(capsys, status):
    from azure.core.pipeline.transport import RequestsTransportResponse
    import requests

    raw = requests.Response()
    raw.status_code, raw._content = status, b'{"error": {"code": "InvalidAuthenticationToken", "message": "expired"}}'
    response = RequestsTransportResponse(HttpRequest("GET", "https://management.azure.com/"), raw)
    report_error(ClientAuthenticationError(response=response))
    err = capsys.readouterr().err
    assert "Azure refused: InvalidAuthenticationToken" in err and "az login" not in err

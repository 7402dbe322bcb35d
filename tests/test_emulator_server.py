"""The emulator as a server: loopback only, 401 without a token, ARM error bodies, state that survives a
restart, fault injection the SDKs' retry policy rides out, request statistics, and `infra emulator serve`."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
import requests
from azure.ai.ml.entities import AmlCompute, Environment
from azure.core.exceptions import HttpResponseError

from emulator_fixtures import TEST_SUBSCRIPTION, start_emulator
from infra_cli.commands.backend import build_clients

SKUS = f"subscriptions/{TEST_SUBSCRIPTION}/providers/Microsoft.Compute/skus?api-version=2021-07-01"


def _cluster(name="gpu", max_instances=2) -> AmlCompute:
    return AmlCompute(name=name, size="Standard_ND96asr_v4", max_instances=max_instances)


def test_request_without_bearer_token_gets_arm_401(emulator):
    r = requests.get(emulator.url + SKUS, verify=str(emulator.cert_path))
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "AuthenticationFailed"
    assert r.headers["WWW-Authenticate"].startswith("Bearer ")
    ok = requests.get(emulator.url + SKUS, headers={"Authorization": f"Bearer {emulator.token}"},
                      verify=str(emulator.cert_path))
    assert ok.status_code == 200 and ok.json()["value"]


def test_arm_errors_have_arm_bodies(emulator):
    auth = {"Authorization": f"Bearer {emulator.token}"}
    r = requests.get(emulator.url + SKUS.split("?")[0], headers=auth, verify=str(emulator.cert_path))
    assert (r.status_code, r.json()["error"]["code"]) == (400, "MissingApiVersionParameter")
    r = requests.get(emulator.url + "subscriptions/x/nothing?api-version=1", headers=auth, verify=str(emulator.cert_path))
    assert r.status_code == 404 and set(r.json()["error"]) >= {"code", "message"}
    ws = (f"subscriptions/{TEST_SUBSCRIPTION}/resourceGroups/rg/providers/Microsoft.MachineLearningServices/"
          "workspaces/absent/computes/gpu?api-version=2023-08-01-preview")
    r = requests.get(emulator.url + ws, headers=auth, verify=str(emulator.cert_path))
    assert (r.status_code, r.json()["error"]["code"]) == (404, "ResourceNotFound")


def test_binds_only_loopback_with_a_certificate_for_it(emulator):
    from cryptography import x509

    assert emulator._httpd.server_address[0] == "127.0.0.1"
    cert = x509.load_pem_x509_certificate(emulator.cert_path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    other = _non_loopback_address()
    if other:
        with pytest.raises(OSError):
            socket.create_connection((other, emulator.port), timeout=2).close()


def _non_loopback_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))    # no packet is sent: this only picks the outbound interface
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


def test_restart_on_the_same_directory_keeps_everything(tmp_path, test_workspace):
    state = tmp_path / "local"
    with start_emulator(state) as first:
        clients = build_clients(test_workspace, local=True, emulator=first)
        clients.ml.compute.begin_create_or_update(_cluster()).result()
        clients.ml.environments.create_or_update(Environment(name="mpi", version="3", image="img:1"))
        # A create still running when the emulator stops finishes after the restart.
        clients.ml.compute.begin_create_or_update(_cluster("later", 1))
    with start_emulator(state) as second:
        clients = build_clients(test_workspace, local=True, emulator=second)
        assert clients.ml.compute.get("gpu").max_instances == 2
        assert clients.ml.environments.get("mpi", version="3").image == "img:1"
        time.sleep(0.3)
        assert clients.ml.compute.get("later").provisioning_state == "Succeeded"
        assert sorted(c.name for c in clients.ml.compute.list()) == ["gpu", "later"]


def test_sdk_calls_succeed_under_20_percent_injected_429_and_500(tmp_path, test_workspace):
    with start_emulator(tmp_path / "local", throttle_rate=0.1, error_rate=0.1, seed=11, retry_after_s=1) as server:
        clients = build_clients(test_workspace, local=True, emulator=server)
        for name in ("a-one", "a-two", "a-three"):
            clients.ml.compute.begin_create_or_update(_cluster(name, 1)).result()
        assert sorted(c.name for c in clients.ml.compute.list()) == ["a-one", "a-three", "a-two"]
        clients.ml.environments.create_or_update(Environment(name="e", image="img:1"))
        assert clients.ml.environments.get("e", version="1").image == "img:1"
        assert len(list(clients.compute.resource_skus.list(filter="location eq 'eastus'"))) > 10
        statuses = server.stats.by_status()
        assert statuses.get(429, 0) > 0 and statuses.get(500, 0) > 0, statuses
        throttled = server.stats.matching()
        assert sum(r.status in (429, 500) for r in throttled) / len(throttled) > 0.05


def test_failed_long_running_operation_surfaces_its_error(tmp_path, test_workspace):
    with start_emulator(tmp_path / "local", lro_failure_rate=1.0) as server:
        clients = build_clients(test_workspace, local=True, emulator=server)
        with pytest.raises(HttpResponseError) as info:
            clients.ml.compute.begin_create_or_update(_cluster()).result()
        assert info.value.error.code == "InternalServerError"
        assert clients.ml.compute.get("gpu").provisioning_state == "Failed"


def test_stats_count_requests_and_writes(clients, emulator):
    emulator.stats.reset()
    clients.ml.compute.begin_create_or_update(_cluster()).result()
    assert emulator.stats.writes == 1
    assert emulator.stats.by_method()["PUT"] == 1 and emulator.stats.by_method()["GET"] >= 2
    emulator.stats.reset()
    assert emulator.stats.total == 0


def test_serve_command_runs_in_the_foreground_and_says_how_to_connect(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "infra_cli", "emulator", "serve", "--dir", str(tmp_path / "d"),
                             "--provisioning-delay", "0.1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        url = first.split("emulator: ", 1)[1].split()[0]
        assert url.startswith("https://127.0.0.1:")
        r = requests.get(url + SKUS, verify=str(tmp_path / "d" / "cert.pem"))
        assert r.status_code == 401
        token = (tmp_path / "d" / "token").read_text().strip()
        r = requests.get(url + SKUS, headers={"Authorization": f"Bearer {token}"}, verify=str(tmp_path / "d" / "cert.pem"))
        assert r.status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    rest = first + proc.stdout.read()
    assert "REQUESTS_CA_BUNDLE" in rest and "cloud_metadata" in rest and str(tmp_path / "d" / "token") in rest
    assert token not in rest   # the token's path is printed, never the token


def test_serve_refuses_bad_fault_settings_without_a_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "infra_cli", "emulator", "serve", "--dir", str(tmp_path),
                        "--throttle-rate", "0.8", "--error-rate", "0.5"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "throttle_rate + error_rate" in r.stderr and "Traceback" not in r.stderr


def test_emulator_help_imports_no_azure_torch_or_jinja(tmp_path):
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "infra_cli", "emulator", "serve", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0
    modules = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")]
    heavy = [m for m in modules if m.split(".")[0] in ("azure", "torch", "jinja2")
             or m.startswith("infra_cli.emulator.server")]
    assert modules and not heavy

"""Sovereign clouds: `workspace.cloud` picks the ARM endpoint, the token scope, the sign-in authority and Azure ML's
registry discovery (validators/clouds.yaml), and every client infra builds follows it.

The clients are infra's own (build_clients for Azure, real azure-core / azure-mgmt-compute / azure-ai-ml), with a
recording TokenCredential; `responses` answers at the transport, so every request is seen and none reaches the
network (an unregistered URL is a ConnectionError).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
import responses
from contract.contract_support import RecordingCredential   # a credential is no Azure service: a stand-in is fine

from infra_cli.knowledge.clouds import clouds, registry_cloud
from infra_cli.stack.model import CLOUDS, Workspace

SUB = "00000000-0000-0000-0000-0000000000c1"
WS_PATH = f"subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.MachineLearningServices/workspaces/ws"
# What each cloud must be, as Azure's pages give them (a wrong row in clouds.yaml fails here and in the SDK check)
EXPECTED = {
    "AzureCloud": ("management.azure.com", "https://management.azure.com/.default", "login.microsoftonline.com",
                   "eastus.api.azureml.ms"),
    "AzureUSGovernment": ("management.usgovcloudapi.net", "https://management.usgovcloudapi.net/.default",
                          "login.microsoftonline.us", "usgovarizona.api.ml.azure.us"),
    "AzureChinaCloud": ("management.chinacloudapi.cn", "https://management.chinacloudapi.cn/.default",
                        "login.chinacloudapi.cn", "chinaeast2.api.ml.azure.cn"),
}


def _workspace(cloud: str | None) -> Workspace:
    extra = {"cloud": cloud} if cloud else {}
    return Workspace.model_validate({"subscription_id": SUB, "resource_group": "rg", "name": "ws",
                                     "location": "eastus", **extra})


def _clients(cloud: str | None, credential: RecordingCredential):
    from infra_cli.commands.backend import build_clients

    return build_clients(_workspace(cloud), local=False, retry_total=0, credential=credential)


def _answer_everything(mock: Intercept, body: dict) -> None:
    for method in (responses.GET, responses.PUT, responses.POST):
        mock.add(method, re.compile(r"https?://.*"), json=body)


class Intercept(responses.RequestsMock):
    """responses' mock, answering nothing it was not told to, keeping the requests it saw after it stops."""

    def __init__(self) -> None:
        super().__init__(assert_all_requests_are_fired=False)
        self.seen: list = []

    def reset(self) -> None:
        self.seen = [c.request for c in self.calls]
        super().reset()


def _hosts(mock: Intercept) -> set[str]:
    return {urlsplit(r.url).hostname for r in mock.seen}


# --- the table is the SDKs' own metadata ------------------------------------------------------------------------

def test_clouds_yaml_equals_the_installed_sdks_cloud_metadata():
    from azure.ai.ml._azure_environments import _environments, _get_cloud_information_from_metadata
    from azure.core import AzureClouds
    from azure.identity import AzureAuthorityHosts
    from azure.mgmt.core.tools import get_arm_endpoints

    table = clouds()
    assert tuple(table) == CLOUDS     # the stack model's enum names every cloud the table has
    authority = {"AzureCloud": AzureAuthorityHosts.AZURE_PUBLIC_CLOUD,
                 "AzureUSGovernment": AzureAuthorityHosts.AZURE_GOVERNMENT,
                 "AzureChinaCloud": AzureAuthorityHosts.AZURE_CHINA}
    core = {"AzureCloud": AzureClouds.AZURE_PUBLIC_CLOUD, "AzureUSGovernment": AzureClouds.AZURE_US_GOVERNMENT,
            "AzureChinaCloud": AzureClouds.AZURE_CHINA_CLOUD}
    for name, cloud in table.items():
        sdk = _environments[name]
        assert cloud.resource_manager == sdk["resource_manager"] == get_arm_endpoints(core[name])["resource_manager"]
        assert cloud.registry_discovery_endpoint == sdk["registry_discovery_endpoint"]
        assert cloud.authority_host == urlsplit(sdk["active_directory"]).hostname == authority[name]
        # the scope MLClient asks for this cloud, which infra's other clients ask too
        assert [cloud.arm_scope] == _get_cloud_information_from_metadata(name)["credential_scopes"]
        assert (urlsplit(cloud.resource_manager).hostname, cloud.arm_scope, cloud.authority_host,
                urlsplit(cloud.registry_discovery_endpoint).hostname) == EXPECTED[name]


# --- the stack setting ----------------------------------------------------------------------------------------

def test_cloud_defaults_to_public_and_reads_in_any_case():
    assert _workspace(None).cloud == "AzureCloud"
    assert _workspace("azureusgovernment").cloud == "AzureUSGovernment"
    assert _workspace("AZURECHINACLOUD").cloud == "AzureChinaCloud"


def test_a_misspelt_cloud_is_a_diagnostic_with_did_you_mean(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text(f"workspace:\n  subscription_id: {SUB}\n  resource_group: rg\n  name: ws\n  location: eastus\n"
                     "  cloud: AzureUSGov\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(stack), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    found = [d for d in json.loads(proc.stdout)["diagnostics"] if d["rule"] == "stack.invalid"]
    assert found and "did you mean 'AzureUSGovernment'?" in found[0]["message"], proc.stdout
    assert found[0]["line"] == 6


def test_infra_schema_shows_the_clouds():
    proc = subprocess.run([sys.executable, "-m", "infra_cli", "schema"], capture_output=True, text=True, timeout=120)
    schema = json.loads(proc.stdout)
    ws = next(d for name, d in schema["$defs"].items() if name == "Workspace")
    assert ws["properties"]["cloud"]["enum"] == list(CLOUDS)
    assert ws["properties"]["cloud"]["default"] == "AzureCloud"


# --- every client goes to the cloud's hosts with the cloud's scope ---------------------------------------------

@pytest.mark.parametrize("cloud", [None, *CLOUDS])
def test_arm_reads_go_to_the_clouds_resource_manager_with_its_scope(cloud):
    arm_host, scope, _, _ = EXPECTED[cloud or "AzureCloud"]
    credential = RecordingCredential()
    clients = _clients(cloud, credential)
    with Intercept() as mock:
        _answer_everything(mock, {"name": "ws"})
        assert clients.arm.get(WS_PATH, "2024-10-01") == {"name": "ws"}
    assert _hosts(mock) == {arm_host}
    assert mock.seen[0].headers["Authorization"] == "Bearer contract-test-token"
    assert set(credential.scopes) == {(scope,)}


_CLUSTER = {"id": f"/{WS_PATH}/computes/gpu", "name": "gpu", "location": "eastus", "value": [],
            "properties": {"computeType": "AmlCompute", "properties": {"vmSize": "Standard_ND96asr_v4"}}}
SDK_CALLS = {   # azure-mgmt-compute's client and azure-ai-ml's MLClient, each answered with _CLUSTER
    "compute": lambda clients: list(clients.compute.resource_skus.list(filter="location eq 'eastus'")) == [],
    "ml": lambda clients: clients.ml.compute.get("gpu").name == "gpu",
}


@pytest.mark.parametrize("sdk", SDK_CALLS)
@pytest.mark.parametrize("cloud", CLOUDS)
def test_sdk_clients_go_to_the_clouds_resource_manager_with_its_scope(cloud, sdk):
    arm_host, scope, _, _ = EXPECTED[cloud]
    credential = RecordingCredential()
    clients = _clients(cloud, credential)
    with Intercept() as mock:
        _answer_everything(mock, _CLUSTER)
        assert SDK_CALLS[sdk](clients)
    assert mock.seen and _hosts(mock) == {arm_host}
    assert credential.scopes and set(credential.scopes) == {(scope,)}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_registry_discovery_asks_the_clouds_discovery_endpoint_with_its_scope(cloud):
    from infra_cli.azure.provider import AzureProvider

    _, scope, _, discovery_host = EXPECTED[cloud]
    credential = RecordingCredential()
    clients = _clients(cloud, credential)
    region = f"https://{discovery_host}/"    # the registry's region answers on the cloud's own Azure ML domain
    with Intercept() as mock:
        mock.add(responses.GET, re.compile(rf"https://{re.escape(discovery_host)}/registrymanagement/.*"),
                 json={"primaryRegionResourceProviderUri": region, "subscriptionId": SUB, "resourceGroup": "reg"})
        base, sub, group = AzureProvider(clients)._registry_base("azureml")
    assert [urlsplit(r.url).path for r in mock.seen] == [
        "/registrymanagement/v1.0/registries/azureml/discovery"]
    assert base.startswith(region) and (sub, group) == (SUB, "reg")
    assert set(credential.scopes) == {(scope,)}


def test_an_unknown_cloud_in_a_users_clouds_yaml_is_a_diagnostic(tmp_path, monkeypatch):
    from infra_cli.commands.backend import build_clients
    from infra_cli.diagnostics import DiagnosticError
    from infra_cli.paths import validators_dir

    copy = tmp_path / "validators"
    copy.mkdir()
    for f in validators_dir().glob("*.yaml"):
        (copy / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
    text = (copy / "clouds.yaml").read_text(encoding="utf-8")
    (copy / "clouds.yaml").write_text(text.split("  AzureChinaCloud:")[0], encoding="utf-8")
    monkeypatch.setenv("INFRA_VALIDATORS_DIR", str(copy))
    with pytest.raises(DiagnosticError) as caught:
        build_clients(_workspace("AzureChinaCloud"), local=False, credential=RecordingCredential())
    assert caught.value.diagnostics[0].rule == "workspace.unknown-cloud"


# --- signing in at the cloud's authority -------------------------------------------------------------------------

def _service_principal(monkeypatch) -> None:
    for name in ("AZURE_AUTHORITY_HOST", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME", "AZURE_FEDERATED_TOKEN_FILE",
                 "IDENTITY_ENDPOINT", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_TENANT_ID", "00000000-0000-0000-0000-0000000000d1")
    monkeypatch.setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-0000000000d2")
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "not-a-real-secret")


def _token_endpoint(mock: Intercept) -> None:
    mock.add_callback(responses.GET, re.compile(r"https://[^/]+/[^/]+/v2\.0/\.well-known/openid-configuration"),
                      callback=_openid)
    mock.add(responses.POST, re.compile(r"https://[^/]+/[^/]+/oauth2/v2\.0/token"),
             json={"access_token": "aad-token", "expires_in": 3600, "token_type": "Bearer"})


def _openid(request):
    parts = urlsplit(request.url)
    tenant = parts.path.split("/")[1]
    base = f"https://{parts.hostname}/{tenant}"
    return 200, {}, json.dumps({"token_endpoint": f"{base}/oauth2/v2.0/token", "issuer": f"{base}/v2.0",
                                "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                                "device_authorization_endpoint": f"{base}/oauth2/v2.0/devicecode"})


@pytest.mark.parametrize("cloud", CLOUDS)
def test_default_credential_signs_in_at_the_clouds_authority(cloud, monkeypatch):
    from infra_cli.azure.clients import workspace_cloud
    from infra_cli.azure.credentials import azure_credential

    _, scope, authority, _ = EXPECTED[cloud]
    _service_principal(monkeypatch)
    credential = azure_credential(workspace_cloud(_workspace(cloud)).authority_host)
    with Intercept() as mock:
        _token_endpoint(mock)
        assert credential.get_token(scope).token == "aad-token"
    assert _hosts(mock) == {authority}
    post = next(r for r in mock.seen if r.method == "POST")
    assert "scope=" + scope.replace(":", "%3A").replace("/", "%2F") in post.body


# --- ACR's Azure AD exchange in `infra image check` --------------------------------------------------------------

@pytest.mark.parametrize("host, cloud", [("myacr.azurecr.io", "AzureCloud"), ("myacr.azurecr.us", "AzureUSGovernment"),
                                         ("myacr.azurecr.cn", "AzureChinaCloud")])
def test_acr_token_is_asked_of_the_registrys_cloud(host, cloud, monkeypatch):
    from infra_cli.image import auth

    _, scope, authority, _ = EXPECTED[cloud]
    assert registry_cloud(host).name == cloud
    recording = RecordingCredential()
    assert auth.aad_access_token(recording, host)[0] == "contract-test-token"
    assert recording.scopes == [(scope,)]
    _service_principal(monkeypatch)    # and without a credential given: DefaultAzureCredential at its authority
    with Intercept() as mock:
        _token_endpoint(mock)
        assert auth.aad_access_token(None, host)[0] == "aad-token"
    assert _hosts(mock) == {authority}


# --- the emulator stands in for any cloud ------------------------------------------------------------------------

def test_local_mode_serves_a_sovereign_workspace(emulator):
    from infra_cli.commands.backend import build_clients

    clients = build_clients(_workspace("AzureUSGovernment"), local=True, emulator=emulator)
    assert urlsplit(clients.arm.base_url).hostname == "127.0.0.1"
    assert clients.arm.scope == "https://management.usgovcloudapi.net/.default"
    assert clients.arm.get(WS_PATH, "2024-10-01")["name"] == "ws"

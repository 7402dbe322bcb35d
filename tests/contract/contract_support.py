"""Replaying Azure's recorded examples (fixtures/, see fixtures/README.md) through the real SDK clients.

The clients are infra's own, built by infra_cli.azure.clients.build_clients for Azure (not the emulator):
https://management.azure.com, azure-core's RequestsTransport, with only the credential swapped for one that
hands out a token without signing in. `responses` answers at the transport, so every request the SDKs make
is captured and an unexpected one fails (responses refuses a URL nobody registered).

Recorded examples carry placeholders where a real answer has a URL (`"nextLink": "nextLink"`, an
`Azure-AsyncOperation` of `https://management.azure.com/subscriptions/...pathToOperationStatus...`) or an ARM id
(`"id": "string"`). The replay swaps each for a full URL or id built from the example's own parameters, and
every test that does so says which.
"""

from __future__ import annotations

import copy
import json
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import responses

from infra_cli.conventions import TAG_ADDRESS, TAG_HASH, TAG_STACK
from infra_cli.plan.model import Resource

FIXTURES = Path(__file__).parent / "fixtures"
ML_EXAMPLES = FIXTURES / "machinelearningservices" / "2024-10-01"
ARM = "https://management.azure.com"
STACK = "contract"
# Where the replay sends an example's placeholder Azure-AsyncOperation / Location (any full URL will do)
OPERATION_URL = ARM + "/subscriptions/{sub}/providers/Microsoft.MachineLearningServices/locations/{loc}/computeOperationsStatus/op-1"


def example(relative: str) -> dict:
    """A recorded example, as checked in (fixtures/<relative>)."""
    return json.loads((FIXTURES / relative).read_text())


def ml_example(relative: str) -> dict:
    return example(f"machinelearningservices/2024-10-01/{relative}")


def response_body(recorded: dict, status: str = "200") -> Any:
    """A deep copy of a recorded response body: tests may change their copy, never the fixture."""
    return copy.deepcopy(recorded["responses"][status].get("body"))


class RecordingCredential:
    """A TokenCredential that hands out a fixed token (no sign-in) and counts the scopes it was asked for."""

    def __init__(self) -> None:
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any):
        from azure.core.credentials import AccessToken

        self.scopes.append(scopes)
        return AccessToken("contract-test-token", int(time.time()) + 3600)

    def close(self) -> None:
        pass


def workspace_url(parameters: dict) -> str:
    """The workspace's ARM URL, from an example's parameters."""
    return (f"{ARM}/subscriptions/{parameters['subscriptionId']}/resourceGroups/{parameters['resourceGroupName']}"
            f"/providers/Microsoft.MachineLearningServices/workspaces/{parameters['workspaceName']}")


def workspace(parameters: dict, location: str):
    from infra_cli.stack.model import Workspace

    return Workspace(subscription_id=parameters["subscriptionId"], resource_group=parameters["resourceGroupName"],
                     name=parameters["workspaceName"], location=location)


def azure_clients(monkeypatch, parameters: dict, location: str):
    """infra's clients for Azure (build_clients(local=False)) for the example's workspace, with a credential that
    needs no sign-in, no retries (a replay answers once; a retry would only hide a wrong request) and no wait
    between polls of an operation."""
    import infra_cli.azure.clients as clients
    import infra_cli.azure.credentials as credentials
    from infra_cli.commands.backend import build_clients

    credential = RecordingCredential()
    monkeypatch.setattr(credentials, "azure_credential", lambda *authority: credential)
    # a recorded operation's answer has no Retry-After: poll it at once, not after Azure's 10 s
    monkeypatch.setitem(clients._POLLING_S, "azure", 0.0)
    return build_clients(workspace(parameters, location), local=False, retry_total=0)


class _Replay(responses.RequestsMock):
    """responses' mock that keeps the calls it saw after it stops (it forgets them on exit)."""

    kept: list = []

    def reset(self) -> None:
        self.kept = list(self.calls)
        super().reset()


@contextmanager
def replay(*, every_answer_used: bool = True) -> Iterator[responses.RequestsMock]:
    """Intercept every HTTP request; a request to a URL nobody registered raises ConnectionError. With
    every_answer_used, an answer registered but never asked for fails the test on exit."""
    with _Replay(assert_all_requests_are_fired=every_answer_used) as mock:
        yield mock


def sent(mock: responses.RequestsMock, method: str) -> list:
    """The requests of one method the SDKs sent, in order (also after the replay ended)."""
    calls = mock.kept if isinstance(mock, _Replay) and mock.kept else mock.calls
    return [c.request for c in calls if c.request.method == method]


def body_of(request) -> Any:
    body = request.body
    return json.loads(body.decode() if isinstance(body, bytes) else body) if body else None


def query_of(request) -> dict[str, str]:
    from urllib.parse import parse_qsl, urlsplit

    return dict(parse_qsl(urlsplit(request.url).query))


def owned(body: dict, desired: Resource) -> dict:
    """The recorded body with the ownership tags infra writes on what it creates (TAG_STACK, TAG_ADDRESS,
    TAG_HASH of the desired resource): the recorded cluster as if infra had created it."""
    out = copy.deepcopy(body)
    out["tags"] = {**(out.get("tags") or {}), TAG_STACK: desired.tags[TAG_STACK],
                   TAG_ADDRESS: desired.tags[TAG_ADDRESS], TAG_HASH: desired.tags[TAG_HASH]}
    return out


# What infra reads off the recorded cluster (Compute/get/AmlCompute.json), attribute by attribute.
RECORDED_CLUSTER = {
    "size": "Standard_NC6",                 # "STANDARD_NC6": the catalog's spelling
    "tier": "dedicated",                    # "Dedicated"
    "min_instances": 0,
    "max_instances": 1,
    "idle_time_before_scale_down": 300,     # "PT5M"
    "enable_node_public_ip": True,
    "ssh_public_access_enabled": None,      # "Enabled", but with no admin user there is no SSH to compare
    "ssh_admin_username": None,
    "ssh_credentials_hash": None,
    "subnet": "test-subnet-resource-id",    # {"id": ...}
    "identity_type": None,
    "user_assigned_identities": [],
    "location": "eastus2",
    "tags": {},
    "description": "some compute",
    "prevent_destroy": False,
}


def recorded_cluster_stack(parameters: dict | None = None, network: str = "{subnet: test-subnet-resource-id}",
                           extra: str = "") -> str:
    """A stack declaring the cluster of Compute/get/AmlCompute.json (or of the example whose `parameters` are
    given) the way a user writes it: the size in the catalog's spelling (Azure answers STANDARD_NC6), the idle
    time in seconds (Azure answers PT5M), the subnet as the recorded id (or `network`), the scale settings and
    description as recorded; `extra`: more lines of the cluster."""
    p = parameters or ml_example("Compute/get/AmlCompute.json")["parameters"]
    return f"""
stack: {STACK}
workspace: {{subscription_id: {p['subscriptionId']}, resource_group: {p['resourceGroupName']},
             name: {p['workspaceName']}, location: eastus2}}
clusters:
  {p['computeName']}:
    size: Standard_NC6
    min_instances: 0
    max_instances: 1
    idle_time_before_scale_down: 300
    enable_node_public_ip: true
    network_settings: {network}
    description: some compute
{extra}"""


def load_stack_text(tmp_path: Path, text: str):
    from infra_cli.stack.load import load_stack

    path = tmp_path / "stack.yaml"
    path.write_text(text)
    return load_stack(path)

"""Long-running writes over the lean REST client (azure/arm.py): an operation Azure never finishes, or one that
fails, must end in an error that says so, never a loop or a success."""

from __future__ import annotations

import pytest
import responses
from azure.core.exceptions import HttpResponseError

from infra_cli.azure.arm import ArmClient
from infra_cli.azure.clients import retry_policy
from infra_cli.azure.credentials import LocalCredential

BASE = "https://management.example.test/"
COMPUTE = BASE + "subscriptions/s/resourceGroups/g/providers/Microsoft.MachineLearningServices/workspaces/w/computes/c"
OPERATION = BASE + "subscriptions/s/providers/Microsoft.MachineLearningServices/locations/eastus/computeOperationsStatus/1"


def _client(deadline_s: float) -> ArmClient:
    return ArmClient(BASE, LocalCredential("t"), retry_policy(0, "local"), polling_s=0.0, lro_deadline_s=deadline_s)


@responses.activate
def test_an_operation_that_never_ends_is_reported_at_the_deadline():
    responses.put(COMPUTE, status=201, json={}, headers={"Azure-AsyncOperation": OPERATION})
    responses.get(OPERATION, json={"status": "InProgress"})
    with pytest.raises(TimeoutError, match="did not finish within"):
        _client(0.3).put(COMPUTE, "2023-08-01-preview", {"location": "eastus"})


@responses.activate
def test_a_failed_operation_raises_azures_own_error():
    responses.put(COMPUTE, status=201, json={}, headers={"Azure-AsyncOperation": OPERATION})
    responses.get(OPERATION, json={"status": "Failed", "error": {"code": "QuotaExceeded", "message": "no cores left"}})
    with pytest.raises(HttpResponseError, match="no cores left"):
        _client(60).put(COMPUTE, "2023-08-01-preview", {"location": "eastus"})


@responses.activate
def test_a_delete_followed_by_location_ends_when_it_stops_answering_202():
    responses.delete(COMPUTE, status=202, headers={"Location": OPERATION})
    responses.get(OPERATION, status=202)
    responses.get(OPERATION, status=204)
    _client(60).delete(COMPUTE, "2023-08-01-preview")
    assert [c.request.method for c in responses.calls] == ["DELETE", "GET", "GET"]

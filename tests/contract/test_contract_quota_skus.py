"""Resource SKUs and usages (Microsoft.Compute): Azure's recorded examples replayed through infra's real
REST reader (azure/arm.py, the requests azure-mgmt-compute would send), and the live facts plan's preflight
reads from them."""

from __future__ import annotations

import pytest
from responses import matchers

from contract_support import ARM, azure_clients, example, query_of, replay, response_body, sent
from spec_schema import SKUS_SPEC, problems

from infra_cli.azure.provider import Provider
from infra_cli.plan.live import LiveQuota, LiveSku, live_quota, live_skus

SKUS = example("compute/skus/2021-07-01/ListAvailableResourceSkusForARegion.json")
USAGE_MAX = example("compute/ComputeRP/2025-04-01/Usage_List_MaximumSet_Gen.json")
USAGE_MIN = example("compute/ComputeRP/2024-11-01/Usage_List_MinimumSet_Gen.json")
SUBSCRIPTION = "34adfa4f-cedf-4dc0-ba29-b6d1a69ab345"  # the examples say "{subscription-id}"
WORKSPACE = {"subscriptionId": SUBSCRIPTION, "resourceGroupName": "testrg123", "workspaceName": "workspaces123"}
SKUS_URL = f"{ARM}/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/skus"


@pytest.fixture
def clients(monkeypatch):
    return azure_clients(monkeypatch, WORKSPACE, "westus")


def usages_url(location: str) -> str:
    return f"{ARM}/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/locations/{location}/usages"


def test_skus_are_asked_for_as_recorded_and_read(clients):
    """ListAvailableResourceSkusForARegion: infra asks with the recorded $filter and api-version, and reads
    each size's family, vCPUs and RDMA capability; a size with no restrictions is offered."""
    location = "westus"
    # Azure's own example breaks its definition in one place (nextLink is a non-nullable string): infra reads
    # the answer all the same
    assert problems(response_body(SKUS), "ResourceSkusResult", request=False, spec=SKUS_SPEC) == [
        "/nextLink: None is not of type 'string'"]
    with replay() as mock:
        mock.get(SKUS_URL, json=response_body(SKUS))
        skus = live_skus(Provider(clients).sku_offers(location))
    (request,) = sent(mock, "GET")
    query = query_of(request)
    assert query["$filter"] == SKUS["parameters"]["$filter"]
    assert query["api-version"] == SKUS["parameters"]["api-version"]
    assert skus == {
        "standard_a0": LiveSku("Standard_A0", "standardA0_A7Family", 1, False, ()),
        "standard_a1": LiveSku("Standard_A1", "standardA0_A7Family", 1, False, ()),
    }


def test_a_restricted_size_says_why(clients):
    """A restriction in the shape the 2021-07-01 ResourceSkuRestrictions defines (type Location, values, reasonCode)
    added to the recorded Standard_A1: the size is not offered in that region, with Azure's reason."""
    body = response_body(SKUS)
    body["value"][1]["restrictions"] = [{"type": "Location", "values": ["westus"], "reasonCode": "NotAvailableForSubscription",
                                         "restrictionInfo": {"locations": ["westus"]}}]
    body["value"][0]["restrictions"] = [{"type": "Zone", "values": ["westus"], "reasonCode": "NotAvailableForSubscription",
                                         "restrictionInfo": {"locations": ["westus"], "zones": ["1"]}}]
    assert problems({"value": body["value"]}, "ResourceSkusResult", request=False, spec=SKUS_SPEC) == []
    with replay() as mock:
        mock.get(SKUS_URL, json=body)
        skus = live_skus(Provider(clients).sku_offers("westus"))
    assert skus["standard_a1"].restrictions == ("NotAvailableForSubscription",)
    assert skus["standard_a0"].restrictions == (), "a zone restriction leaves the region's other zones"


def test_usages_follow_next_link_and_skip_nameless_ones(clients):
    """Usage_List_MaximumSet_Gen ends with a nextLink placeholder ("aaa..."): the replay puts the usages URL
    with a $skipToken there, and answers it with Usage_List_MinimumSet_Gen's page, whose usage has an empty
    name (no family: nothing to hold a size's quota against)."""
    location = "westus"
    first = response_body(USAGE_MAX)
    assert not first["nextLink"].startswith("https://"), "a placeholder, not a URL"
    first["nextLink"] = f"{usages_url(location)}?api-version={USAGE_MAX['parameters']['api-version']}&$skipToken=p2"
    with replay() as mock:
        mock.get(usages_url(location), json=response_body(USAGE_MIN),
                 match=[matchers.query_param_matcher({"$skipToken": "p2"}, strict_match=False)])
        mock.get(usages_url(location), json=first)
        quota = live_quota(Provider(clients).usages(location))
    assert len(sent(mock, "GET")) == 2
    recorded = USAGE_MAX["responses"]["200"]["body"]["value"][0]
    family = recorded["name"]["value"]
    assert quota == {family: LiveQuota(family, recorded["currentValue"], recorded["limit"])}

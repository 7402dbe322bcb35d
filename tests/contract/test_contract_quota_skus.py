"""Resource SKUs (Microsoft.Compute) and Azure ML's usages: Azure's recorded examples replayed through infra's
real REST reader (azure/arm.py, the requests azure-mgmt-compute and azure-ai-ml would send), and the live facts
plan's preflight reads from them."""

from __future__ import annotations

import pytest
from responses import matchers

from contract_support import ARM, azure_clients, example, query_of, replay, response_body, sent
from spec_schema import SKUS_SPEC, problems

from infra_cli.azure.provider import API_USAGES, AzureProvider
from infra_cli.plan.live import LiveQuota, LiveSku, live_quota, live_skus

SKUS = example("compute/skus/2021-07-01/ListAvailableResourceSkusForARegion.json")
ML_USAGES = example("machinelearningservices/2024-10-01/Usage/list.json")
SUBSCRIPTION = "34adfa4f-cedf-4dc0-ba29-b6d1a69ab345"  # the examples say "{subscription-id}"
WORKSPACE = {"subscriptionId": SUBSCRIPTION, "resourceGroupName": "testrg123", "workspaceName": "workspaces123"}
SKUS_URL = f"{ARM}/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/skus"


@pytest.fixture
def clients(monkeypatch):
    return azure_clients(monkeypatch, WORKSPACE, "westus")


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
        skus = live_skus(AzureProvider(clients).sku_offers(location))
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
        skus = live_skus(AzureProvider(clients).sku_offers("westus"))
    assert skus["standard_a1"].restrictions == ("NotAvailableForSubscription",)
    assert skus["standard_a0"].restrictions == (), "a zone restriction leaves the region's other zones"


def ml_usages_url(location: str) -> str:
    return f"{ARM}/subscriptions/{SUBSCRIPTION}/providers/Microsoft.MachineLearningServices/locations/{location}/usages"


def test_azure_ml_quota_is_read_from_its_usages_as_recorded(clients):
    """Usage/list.json (Azure ML's usages, which AmlCompute draws on; not Microsoft.Compute's VM quota), split
    into two pages by a nextLink: the regional totals per tier, each family's pools and a workspace's share
    are read; rows of single computes and the cluster count are not pools of vCPUs."""
    location = ML_USAGES["parameters"]["location"]
    rows = response_body(ML_USAGES)["value"]
    first = {"value": rows[:5], "nextLink": f"{ml_usages_url(location)}?api-version={API_USAGES}&$skipToken=p2"}
    with replay() as mock:
        mock.get(ml_usages_url(location), json={"value": rows[5:]},
                 match=[matchers.query_param_matcher({"$skipToken": "p2"}, strict_match=False)])
        mock.get(ml_usages_url(location), json=first)
        quota = live_quota(AzureProvider(clients).usages(location))
    requests = sent(mock, "GET")
    assert len(requests) == 2 and query_of(requests[0])["api-version"] == API_USAGES
    assert quota.dedicated_total == LiveQuota("Total Cluster Dedicated Regional vCPUs", 14, 24)
    assert quota.low_priority_total == LiveQuota("Total Cluster LowPriority Regional vCPUs", 18, 50)
    assert quota.families == {
        ("dedicated", "d"): LiveQuota("Standard D Family Cluster Dedicated vCPUs", 0, 48),
        ("dedicated", "dsv2"): LiveQuota("Standard DSv2 Family Cluster Dedicated vCPUs", 2, 24),
        ("dedicated", "nc"): LiveQuota("Standard NC Family Cluster Dedicated vCPUs", 12, 24),
        ("dedicated", "ncv3"): LiveQuota("Standard NCv3 Family Cluster Dedicated vCPUs", 0, 0),
        ("low_priority", "nc"): LiveQuota("Standard NC Family Cluster LowPriority vCPUs", 18, -1),
    }
    # the recorded workspace rows spell their type two ways (workspaces/usages, workspace/usages): the id says it
    assert quota.workspace_families == {
        ("demo_workspace1", "dedicated", "dsv2"): LiveQuota("Standard DSv2 Family Cluster Dedicated vCPUs", 2, 24,
                                                            "demo_workspace1"),
        ("demo_workspace1", "dedicated", "nc"): LiveQuota("Standard NC Family Cluster Dedicated vCPUs", 6, 24,
                                                          "demo_workspace1"),
        ("demo_workspace1", "low_priority", "nc"): LiveQuota("Standard NC Family Cluster LowPriority vCPUs", 6, -1,
                                                             "demo_workspace1"),
    }
    # a size's family as Azure ML's vmSizes and the resource SKUs name it finds its pools
    assert [q.name for q in quota.pools("standardDSv2Family", "dedicated", "demo_workspace1")] == [
        "Total Cluster Dedicated Regional vCPUs", "Standard DSv2 Family Cluster Dedicated vCPUs",
        "Standard DSv2 Family Cluster Dedicated vCPUs"]
    assert [q.name for q in quota.pools("standardNCFamily", "low_priority", "other")] == [
        "Total Cluster LowPriority Regional vCPUs"]     # the family's low-priority pool has no limit (-1)


@pytest.mark.parametrize("tier, nodes, short", [
    ("dedicated", 1, None),                                        # 6 vCPUs: 10 left in the total, 12 in NC
    ("dedicated", 2, "Total Cluster Dedicated Regional vCPUs"),    # 12: past the total's 10
    ("low_priority", 5, None),                                     # 30 of the low-priority total's 32
    ("low_priority", 6, "Total Cluster LowPriority Regional vCPUs"),
])
def test_preflight_holds_a_new_cluster_to_the_recorded_quota(tmp_path, clients, tier, nodes, short):
    from infra_cli.knowledge.skus import load_catalog
    from infra_cli.plan.live import LiveFacts
    from infra_cli.plan.model import CREATE, ResourceChange
    from infra_cli.plan.preflight import preflight
    from infra_cli.stack.load import load_stack

    location = ML_USAGES["parameters"]["location"]
    with replay() as mock:
        mock.get(ml_usages_url(location), json=response_body(ML_USAGES))
        quota = live_quota(AzureProvider(clients).usages(location))
    stack = tmp_path / "s.yaml"
    stack.write_text("stack: s\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg,"
                     f" name: demo_workspace1, location: {location}}}\n"
                     f"clusters:\n  nc6:\n    size: Standard_NC6\n    tier: {tier}\n    max_instances: {nodes}\n")
    after = {"size": "Standard_NC6", "tier": tier, "max_instances": nodes}
    facts = LiveFacts(location, location, {"standard_nc6": LiveSku("Standard_NC6", "standardNCFamily", 6, False)}, quota)
    found = [d for d in preflight([ResourceChange("cluster.nc6", "cluster", "nc6", CREATE, None, after)], [], facts,
                                  load_catalog(), load_stack(stack).source, "demo_workspace1")
             if d.rule == "preflight.quota"]
    if short is None:
        assert found == []
    else:
        [d] = found
        assert f"'{short}'" in d.message and f"{nodes * 6} more vCPUs" in d.message and d.line == 7, d.message  # at max_instances


# ARM's answer to an identity without the permission (common-types ErrorResponse; the code and wording of
# https://learn.microsoft.com/azure/role-based-access-control/troubleshooting#symptom---authorization-failed).
FORBIDDEN = {"error": {"code": "AuthorizationFailed", "message": (
    "The client 'user@example.com' with object id '00000000-0000-0000-0000-000000000001' does not have "
    "authorization to perform action '{action}' over scope '/subscriptions/" + SUBSCRIPTION + "' or the scope "
    "is invalid. If access was recently granted, please refresh your credentials.")}}


def test_a_403_on_the_region_facts_reads_as_unread_not_as_empty(clients):
    from infra_cli.plan.live import region_facts

    location = "westus"
    with replay(every_answer_used=False) as mock:
        for url, action in ((SKUS_URL, "Microsoft.Compute/skus/read"),
                            (ml_usages_url(location), "Microsoft.MachineLearningServices/locations/usages/read")):
            body = {"error": {**FORBIDDEN["error"], "message": FORBIDDEN["error"]["message"].format(action=action)}}
            mock.get(url, json=body, status=403)
        mock.get(f"{ARM}/subscriptions/{SUBSCRIPTION}/resourceGroups/testrg123/providers/"
                 "Microsoft.MachineLearningServices/workspaces/workspaces123", json={"location": location})
        provider = AzureProvider(clients)
        offers, usages = provider.sku_offers(location), provider.usages(location)
        assert offers is None and usages is None
        facts = region_facts(location, provider.workspace_location(), offers, usages)   # as plan reads them
    assert facts.unread == ("skus", "quota") and facts.skus == {} and facts.workspace_location == location
    assert len([r for r in sent(mock, "GET") if "/skus" in r.url]) == 1

"""Serverless distributions (no `cluster:`; resources.instance_type, instance_count, queue_settings) and computes
infra does not manage (`compute: azureml:NAME`), offline: every rule that judges a cluster's size judges a
serverless job's instance_type alike (Context.size_of is the one place rules read the size from); a compute infra
does not manage has no size offline, so no size rule speaks of it (plan reads it live: tests/test_serverless_local.py)."""

from __future__ import annotations

import pytest

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import load_stack
from rules_fixtures import A100, CURATED_ENV, HEADER, check, errors, one_distribution

T4 = "Standard_NC64as_T4_v3"   # 4 T4 GPUs, no InfiniBand
CPU = "Standard_D4s_v3"


def serverless(body: str, size: str) -> str:
    """one_distribution's stack with its cluster `gpu` taken away and the job on serverless compute of `size`."""
    clusters, rest = body.split("environments:\n", 1)
    return "environments:\n" + rest.replace("    cluster: gpu\n",
                                            f"    resources: {{instance_type: {size}}}\n"
                                            "    queue_settings: {job_tier: standard}\n")


def attached(body: str) -> str:
    clusters, rest = body.split("environments:\n", 1)
    return "environments:\n" + rest.replace("    cluster: gpu\n", "    compute: azureml:k8s-gpu\n")


# distributions whose size rules speak: (size, distribution lines, the rules the cluster of that size gets)
SIZE_CASES = {
    "gpus-exceeded": (T4, "type: pytorch\nprocess_count_per_instance: 8\n", {"distribution.gpus-exceeded"}),
    "gpus-underused": (A100, "type: pytorch\nprocess_count_per_instance: 2\n", {"distribution.gpus-underused"}),
    "multinode-no-infiniband": (T4, "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 4\n",
                                {"distribution.multinode-without-infiniband"}),
    "no-gpus": (CPU, "type: pytorch\nframework: ddp\nprocess_count_per_instance: 1\n", {"distribution.no-gpus"}),
    "per-node-launcher": (A100, "type: pytorch\nprocess_count_per_instance: 8\n"
                          "command: torchrun --nproc_per_node 8 train.py\n", {"distribution.per-node-launcher"}),
    "launcher-gpus": (A100, "type: pytorch\ncommand: torchrun --nproc_per_node 4 train.py\n",
                      {"distribution.gpus-underused"}),
    "ray-num-gpus": (T4, "type: ray\ndistribution: {type: ray, head_node_additional_args: '--num-gpus 8'}\n",
                     {"distribution.ray-settings"}),
    "clean": (A100, "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 8\n", set()),
}
SIZE_RULES = {"distribution.gpus-exceeded", "distribution.gpus-underused", "distribution.multinode-without-infiniband",
              "distribution.no-gpus", "distribution.per-node-launcher", "distribution.ray-settings",
              "cluster.infiniband-unverified", "distribution.infiniband-disabled", "distribution.lightning-trainer"}


def _size_rules(r) -> set[str]:
    return {d.rule for d in r.diagnostics if d.rule in SIZE_RULES}


@pytest.mark.parametrize("case", sorted(SIZE_CASES))
def test_every_size_rule_judges_a_serverless_instance_type_as_a_clusters_size(tmp_path, case):
    size, lines, expected = SIZE_CASES[case]
    body = one_distribution(size, CURATED_ENV, lines)
    on_cluster = check(tmp_path, body)
    assert _size_rules(on_cluster) == expected, on_cluster.diagnostics
    on_serverless = check(tmp_path, serverless(body, size))
    assert _size_rules(on_serverless) == expected, on_serverless.diagnostics
    assert {(d.rule, d.severity) for d in on_serverless.diagnostics if d.rule in SIZE_RULES} == \
        {(d.rule, d.severity) for d in on_cluster.diagnostics if d.rule in SIZE_RULES}


def test_a_serverless_job_is_named_as_such_and_its_size_pointed_at(tmp_path):
    body = serverless(one_distribution(CPU, CURATED_ENV, "type: pytorch\nframework: ddp\n"), CPU)
    r = check(tmp_path, body)
    r.one("distribution.no-gpus", "warning", f"instance_type: {CPU}")
    body = serverless(one_distribution(T4, CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                        "process_count_per_instance: 4\n"), T4)
    d = check(tmp_path, body).one("distribution.multinode-without-infiniband", "warning", "instance_count: 2")
    assert "serverless compute" in d.message and "cluster" not in d.message
    assert "Standard_ND" in d.hint   # InfiniBand sizes with the 4 GPUs the job's processes need


def test_a_serverless_instance_type_that_is_no_size_is_refused_where_written(tmp_path):
    body = serverless(one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"), "ND96-big")
    d = check(tmp_path, body).one("cluster.size-unknown", "error", "instance_type: ND96-big")
    assert "serverless distribution" in d.message and "infra skus" in d.hint
    assert check(tmp_path, body.replace("ND96-big", A100)).of("cluster.size-unknown") == []


def test_a_serverless_job_without_instance_type_is_judged_on_nothing_it_cannot_know(tmp_path):
    """Azure ML picks the size of a serverless job without resources.instance_type: no size rule speaks."""
    body = serverless(one_distribution(T4, CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                        "process_count_per_instance: 8\n"), T4)
    body = body.replace(f"    resources: {{instance_type: {T4}}}\n", "")
    r = check(tmp_path, body)
    assert errors(r) == [] and _size_rules(r) == set()


def test_a_compute_infra_does_not_manage_has_no_size_offline(tmp_path):
    body = attached(one_distribution(T4, CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                      "process_count_per_instance: 8\n"))
    r = check(tmp_path, body)
    assert errors(r) == [] and _size_rules(r) == set()
    assert r.of("distribution.dangling-reference") == []


def test_cluster_and_compute_together_are_refused(tmp_path):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\ncompute: azureml:k8s\n")
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + body, encoding="utf-8")
    with pytest.raises(DiagnosticError) as exc:
        load_stack(path)
    d = exc.value.diagnostics[0]
    assert "cluster and compute" in d.message and d.line


@pytest.mark.parametrize("name", ["azureml:a/b", "azureml:", "k8s compute", "azureml:x\nprint", "../x", "azureml:-x"])
def test_a_compute_reference_is_one_name(tmp_path, name):
    body = attached(one_distribution(A100, CURATED_ENV, "type: pytorch\n")).replace(
        "compute: azureml:k8s-gpu", f"compute: {name!r}" if "\n" not in name else 'compute: "azureml:x\\nprint"')
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + body, encoding="utf-8")
    with pytest.raises(DiagnosticError) as exc:
        load_stack(path)
    assert exc.value.diagnostics[0].line


# ---- plan's live judgement of a serverless job, as pure functions over what a provider read ----

def _serverless_loaded(tmp_path, tier: str = "standard", count: int = 2):
    from infra_cli.stack.load import load_stack
    text = HEADER + serverless(one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: {count}\n"
                                                "process_count_per_instance: 8\n"), A100).replace("standard", tier)
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    return load_stack(path)


@pytest.mark.parametrize("tier, family, low, short", [
    ("standard", (0, 10_000), (0, 10_000), None),
    ("standard", (0, 150), (0, 10_000), "Standard NDASv4_A100 Family Cluster Dedicated vCPUs"),
    ("spot", (0, 150), (0, 10_000), None),                           # spot draws on the low-priority total only
    ("spot", (0, 10_000), (0, 100), "Total Cluster LowPriority Regional vCPUs"),
])
def test_a_serverless_job_draws_on_azure_ml_quota_as_a_cluster_does(tmp_path, tier, family, low, short):
    from infra_cli.knowledge.skus import load_catalog
    from infra_cli.plan.live import LiveFacts
    from infra_cli.plan.referenced import serverless_preflight
    from test_preflight_quota import A100 as LIVE_A100, quota

    facts = LiveFacts("eastus", "eastus", {A100.lower(): LIVE_A100}, quota(family=family, low=low))
    found = [d for d in serverless_preflight(_serverless_loaded(tmp_path, tier), facts, load_catalog())
             if d.rule == "preflight.quota"]
    if short is None:
        assert found == []
    else:
        assert len(found) == 1 and short in found[0].message and "192 vCPUs" in found[0].message
        assert found[0].line and "instance_count" in found[0].hint


def test_a_serverless_size_the_region_lacks_or_restricts_is_a_plan_error(tmp_path):
    from infra_cli.knowledge.skus import load_catalog
    from infra_cli.plan.live import LiveFacts, LiveSku
    from infra_cli.plan.referenced import serverless_preflight
    from test_preflight_quota import quota

    loaded = _serverless_loaded(tmp_path)
    none = serverless_preflight(loaded, LiveFacts("eastus", "eastus", {}, quota()), load_catalog())
    assert [d.rule for d in none] == ["preflight.size-unavailable"]
    restricted = LiveSku(A100, "standardNDASv4_A100Family", 96, True, ("NotAvailableForSubscription",))
    found = serverless_preflight(loaded, LiveFacts("eastus", "eastus", {A100.lower(): restricted}, quota()),
                                 load_catalog())
    assert [d.rule for d in found] == ["preflight.size-restricted"]
    unread = serverless_preflight(loaded, LiveFacts("eastus", "eastus", {}, quota(), ("skus",)), load_catalog())
    assert unread == []   # unread is said once by preflight, never taken as "not offered"


def test_a_serverless_job_is_priced_for_its_nodes_while_it_runs(tmp_path):
    from infra_cli.knowledge.skus import load_catalog
    from infra_cli.plan.referenced import serverless_costs

    catalog = load_catalog()
    price = catalog.price(A100, "eastus")
    [d] = serverless_costs(_serverless_loaded(tmp_path, count=2), catalog)
    assert d.rule == "plan.serverless-cost" and d.severity == "info"
    if price is None or price.per_node_hour("dedicated") is None:
        assert "price unknown" in d.message
    else:
        per = price.per_node_hour("dedicated")
        assert f"${per:,.2f} per node-hour" in d.message and f"${per * 2:,.2f}/hour for its 2 node(s)" in d.message


@pytest.mark.parametrize("reference, name, virtual", [
    ("azureml:k8s-gpu", "k8s-gpu", False), ("k8s-gpu", "k8s-gpu", False),
    ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/"
     "Microsoft.MachineLearningServices/virtualclusters/vc1", "vc1", True),
    ("azureml:/subscriptions/s/resourceGroups/rg/providers/Microsoft.MachineLearningServices/workspaces/mlw/"
     "computes/aks1", "aks1", False),
])
def test_a_compute_is_named_as_azure_ai_ml_reads_it(tmp_path, reference, name, virtual):
    body = attached(one_distribution(A100, CURATED_ENV, "type: pytorch\n")).replace(
        "compute: azureml:k8s-gpu", f"compute: {reference!r}")
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + body, encoding="utf-8")
    stack = load_stack(path).stack
    dist = stack.distributions["job"]
    assert (dist.compute_name, dist.virtual_cluster, dist.runs_on) == (name, virtual, "compute")
    assert stack.compute_of(dist) == (reference if "/" in reference else f"azureml:{name}")


def test_a_bad_compute_reference_says_what_is_read(tmp_path):
    body = attached(one_distribution(A100, CURATED_ENV, "type: pytorch\n")).replace(
        "compute: azureml:k8s-gpu", "compute: 'azureml:a/b'")
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + body, encoding="utf-8")
    with pytest.raises(DiagnosticError) as exc:
        load_stack(path)
    d = exc.value.diagnostics[0]
    assert "azureml:NAME" in d.message + (d.hint or "") and "virtualclusters" in d.message + (d.hint or "")


def test_a_smoke_recorded_before_compute_existed_still_holds(tmp_path):
    """The smoke record's hash is over the distribution's settings: `compute`, unset, is not among them, so a
    distribution on a cluster hashes as it did before the field was added (a passed smoke stays passed)."""
    from infra_cli.plan.smoke_pending import _distribution_settings

    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + one_distribution(A100, CURATED_ENV, "type: pytorch\n"), encoding="utf-8")
    assert "compute" not in _distribution_settings(load_stack(path), "job")
    path.write_text(HEADER + attached(one_distribution(A100, CURATED_ENV, "type: pytorch\n")), encoding="utf-8")
    assert _distribution_settings(load_stack(path), "job")["compute"] == "azureml:k8s-gpu"


@pytest.mark.parametrize("reference", ["serverless", "azureml:serverless"])
def test_compute_serverless_is_serverless_compute(tmp_path, reference):
    """azure-ai-ml sends compute: serverless as is (its SERVERLESS_COMPUTE): Azure ML's serverless compute, judged
    and rendered as a job without compute."""
    size, lines, expected = SIZE_CASES["gpus-exceeded"]
    body = serverless(one_distribution(size, CURATED_ENV, lines), size).replace(
        "    resources:", f"    compute: {reference}\n    resources:")
    r = check(tmp_path, body)
    assert _size_rules(r) == expected
    stack = load_stack(tmp_path / "stack.yaml").stack
    dist = stack.distributions["job"]
    assert (dist.runs_on, dist.compute_name, stack.compute_of(dist), stack.size_of(dist)) == \
        ("serverless", None, None, size)

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
    assert "serverless" in d.message and "infra skus" in d.hint
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

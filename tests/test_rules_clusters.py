"""The rules of infra_cli/validate/rules/clusters.py (size, InfiniBand, SSH, location, network, pasted name), each
on a minimal stack that breaks it: rule id, severity, position, hint. Each test fails if its rule is removed."""

from __future__ import annotations

import pytest

from infra_cli.knowledge.skus import load_catalog
from infra_cli.stack.load import load_stack

from rules_fixtures import A100, CURATED_ENV, HEADER, Checked, _sizes_named, check, errors, one_distribution, undeclared


def test_unknown_size_is_a_warning_with_a_suggestion(tmp_path):
    r = check(tmp_path, "clusters:\n  gpu:\n    size: Standard_ND96asr_v5\n")
    d = r.one("cluster.size-unknown", "warning", "Standard_ND96asr_v5")
    assert "Standard_ND96asr_v4" in d.hint


def test_unknown_size_is_an_error_when_infiniband_is_required(tmp_path):
    r = check(tmp_path, "clusters:\n  gpu:\n    size: Standard_Made_Up\n    infiniband: required\n")
    r.one("cluster.size-unknown", "error", "Standard_Made_Up")


def test_retired_size_is_an_error_offline(tmp_path):
    # validate cannot know whether the cluster exists; `infra plan` downgrades it for a live one (test_catalog_sizes)
    r = check(tmp_path, "clusters:\n  gpu:\n    size: Standard_NC24r\n")
    d = r.one("cluster.size-retired", "error", "Standard_NC24r")
    assert "2023-09-06" in d.message and "infra plan" in d.hint


@pytest.mark.parametrize("size, family", [
    # a 4-GPU V100 without InfiniBand: current NC sizes, not the catalog's alphabetically first ND (GB200)
    ("Standard_NC24s_v3", "Standard_NC"),
    # with InfiniBand: no current NC keeps it, so InfiniBand sizes (ND) with at least its 4 GPUs
    ("Standard_NC24rs_v3", "Standard_ND"),
])
def test_a_retired_sizes_hint_names_current_sizes_that_keep_its_gpus_and_infiniband(tmp_path, size, family):
    d = check(tmp_path, f"clusters:\n  gpu:\n    size: {size}\n").one("cluster.size-retired", "error", size)
    named = d.hint.split("e.g. ")[1].split(" (")[0].split(", ")
    assert named and all(n.startswith(family) for n in named), d.hint
    catalog = load_catalog()
    old = catalog.get(size)
    for n in named:
        sku = catalog.get(n)
        assert sku.retirement_date is None and sku.gpus >= old.gpus
        assert sku.infiniband_eligible or not old.infiniband_eligible


@pytest.mark.parametrize("size, reason", [
    ("Standard_NC24r", "no SR-IOV"),                 # RDMA without SR-IOV: not usable by NCCL in Azure ML
    ("Standard_H16r", "no SR-IOV"),
    ("Standard_NC96ads_A100_v4", "no InfiniBand"),   # NC A100 v4: Ethernet only
    ("Standard_NC80adis_H100_v5", "no InfiniBand"),  # NC H100 v5: none
    ("Standard_NC24s_v3", "no InfiniBand"),
])
def test_infiniband_required_on_an_ineligible_size(tmp_path, size, reason):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {size}\n    infiniband: required\n")
    d = r.one("cluster.infiniband-ineligible", "error", size)
    assert reason in d.message
    # a GPU size is pointed at the GPU InfiniBand sizes, a CPU one (H16r) at the HPC ones
    assert ("Standard_HB120rs_v3" if size == "Standard_H16r" else "Standard_ND96asr_v4") in d.hint
    assert "infiniband: optional" in d.hint


@pytest.mark.parametrize("size", ["Standard_ND96asr_v4", "Standard_ND96isr_H100_v5", "Standard_NC24rs_v3",
                                  "Standard_ND40rs_v2", "standard_nd96amsr_a100_v4"])
def test_infiniband_required_on_an_eligible_size_is_clean(tmp_path, size):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {size}\n    infiniband: required\n")
    assert not r.of("cluster.infiniband-ineligible")


def test_ssh_access_without_a_user_and_key(tmp_path):
    # issue 32: Azure ML accepts it (azure-ai-ml sends it, Azure's recorded GETs show clusters so): a warning that
    # nobody can log in, not an error
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    ssh_public_access_enabled: true\n")
    assert "nobody can log in" in r.one("cluster.ssh-settings", "warning", "ssh_public_access_enabled: true").message
    assert errors(r) == []


def test_ssh_access_with_a_key_is_clean(tmp_path):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    ssh_public_access_enabled: true\n"
                        "    ssh_settings: {admin_username: azureuser, ssh_key_value: ssh-rsa AAAA}\n")
    assert not r.of("cluster.ssh-settings")


def test_ssh_password_written_in_the_stack_warns(tmp_path, monkeypatch):
    body = (f"clusters:\n  gpu:\n    size: {A100}\n    ssh_public_access_enabled: true\n"
            "    ssh_settings:\n      admin_username: azureuser\n      admin_password: {pw}\n")
    d = check(tmp_path, body.format(pw="Sup3rS3cret!x")).one("cluster.ssh-password-inline", "warning", "Sup3rS3cret!x")
    assert "Sup3rS3cret" not in d.message + d.hint
    # the fix is the stack language's sensitive variable (or a key), never an environment variable's ${NAME}
    assert "`admin_password: {type: string, sensitive: true}`" in d.hint and "${var.admin_password}" in d.hint
    assert "`--var admin_password=...`, `INFRA_VAR_admin_password` or a var file" in d.hint
    assert "ssh_key_value" in d.hint and "${NODE_" not in d.hint
    sensitive = "variables:\n  admin_password: {type: string, sensitive: true}\n"
    monkeypatch.setenv("INFRA_VAR_admin_password", "Sup3rS3cret!x")
    assert not check(tmp_path, sensitive + body.format(pw="${var.admin_password}")).of("cluster.ssh-password-inline")
    # a variable not declared sensitive: the hint names it, to declare sensitive
    monkeypatch.setenv("INFRA_VAR_pw", "Sup3rS3cret!x")
    plain = check(tmp_path, "variables:\n  pw: {type: string}\n" + body.format(pw="${var.pw}"))
    d = plain.one("cluster.ssh-password-inline", "warning", "${var.pw}")
    assert "variable 'pw', which is not declared sensitive" in d.message and "`--var pw=...`" in d.hint
    monkeypatch.setenv("NODE_ADMIN_PASSWORD", "Sup3rS3cret!x")
    assert not check(tmp_path, body.format(pw="${NODE_ADMIN_PASSWORD}")).of("cluster.ssh-password-inline")
    # `$$` is an escaped dollar, not a reference: still written in the file.
    assert check(tmp_path, body.format(pw="'pa$$word'")).of("cluster.ssh-password-inline")


def test_cluster_in_another_region_warns(tmp_path):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    location: West US 2\n")
    r.one("cluster.location", "warning", "West US 2")
    same = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    location: East US\n")
    assert not same.of("cluster.location")


def test_unknown_size_requiring_infiniband(tmp_path):
    r = check(tmp_path, "clusters:\n  gpu:\n    size: Standard_ND96isr_B300_v7\n    infiniband: required\n")
    r.one("cluster.infiniband-unverified", "warning", "Standard_ND96isr_B300_v7")
    r = check(tmp_path, "clusters:\n  gpu:\n    size: Standard_NC8ads_Z9_v9\n    infiniband: required\n")
    d = r.one("cluster.infiniband-ineligible", "error", "Standard_NC8ads_Z9_v9")
    assert "no `r`" in d.message


def test_did_you_mean_stays_in_the_family(tmp_path):
    r = check(tmp_path, "clusters:\n  cpu:\n    size: Standard_DS15_v2\n")
    assert not r.of("cluster.size-unknown")  # a CPU family the catalog does not set out to cover: judged by name
    r = check(tmp_path, one_distribution("Standard_DS15_v2", CURATED_ENV, "type: mpi\ninstance_count: 2\n"))
    assert not r.of("distribution.multinode-without-infiniband")  # issue 32: a CPU job across nodes runs over TCP
    assert not any("did you mean" in (d.hint or "") for d in r.diagnostics)  # issue 11: it suggested ND40rs_v2
    r = check(tmp_path, "clusters:\n  gpu:\n    size: Standard_ND40rs_v3\n")
    assert "did you mean 'Standard_ND40rs_v2'" in r.one("cluster.size-unknown", "warning", "Standard_ND40rs_v3").hint


def test_retiring_size_warns(tmp_path):
    import datetime

    from infra_cli.knowledge.skus import load_catalog
    from infra_cli.validate.rules import run_rules

    text = HEADER + "clusters:\n  viz:\n    size: Standard_NV12s_v3\n"
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    before = run_rules(load_stack(path), load_catalog(), today=datetime.date(2026, 1, 1))
    assert undeclared(load_stack(path), datetime.date(2026, 1, 1)) == []
    r = Checked(text, before, str(path))
    assert "2026-09-30" in r.one("cluster.size-retiring", "warning", "Standard_NV12s_v3").message
    after = run_rules(load_stack(path), load_catalog(), today=datetime.date(2026, 10, 1))
    assert undeclared(load_stack(path), datetime.date(2026, 10, 1)) == []
    assert [d.severity for d in after if d.rule == "cluster.size-retired"] == ["error"]


def test_public_ip_off_without_a_subnet(tmp_path):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    enable_node_public_ip: false\n")
    # issue 32: Azure ML decides by the workspace's managed network, which `infra plan` reads: offline a warning
    r.one("cluster.public-ip-without-subnet", "warning", "enable_node_public_ip: false")
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    enable_node_public_ip: false\n"
                        "    network_settings: {vnet_name: v, subnet: s}\n")
    assert not r.of("cluster.public-ip-without-subnet")


def test_a_subnet_name_needs_its_vnet(tmp_path):
    """Without vnet_name the SDK would send .../virtualNetworks/None/subnets/NAME (tests/contract found it)."""
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    network_settings:\n      subnet: snet-gpu\n")
    r.one("cluster.subnet-without-vnet", "error", "subnet: snet-gpu")
    for ok in ("{vnet_name: v, subnet: s}", "{subnet: /subscriptions/0/resourceGroups/rg/providers/"
               "Microsoft.Network/virtualNetworks/v/subnets/s}"):
        r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    network_settings: {ok}\n")
        assert not r.of("cluster.subnet-without-vnet")


def test_pasted_compute_name_must_equal_the_key(tmp_path):
    r = check(tmp_path, f"clusters:\n  gpu:\n    name: gpu-cluster\n    size: {A100}\n")
    r.one("cluster.name-mismatch", "error", "name: gpu-cluster")
    r = check(tmp_path, f"clusters:\n  gpu:\n    name: gpu\n    size: {A100}\n")
    assert r.diagnostics == []


# (end of the launcher, TensorFlow and image tests)


def test_issue_examples_for_sizes(tmp_path):
    # issue 11: two nodes of Standard_NC4as_T4_v3 were only a size-unknown warning; now it is catalogued
    r = check(tmp_path, one_distribution("Standard_NC4as_T4_v3", CURATED_ENV, "type: pytorch\ninstance_count: 2\n"))
    assert not r.of("cluster.size-unknown")
    assert "no InfiniBand" in r.one("distribution.multinode-without-infiniband", "warning", "instance_count: 2").message
    # a did-you-mean reads names in any case, as Azure does, and stays in the family
    r = check(tmp_path, "clusters:\n  gpu:\n    size: standard_nd96asr_v5\n")
    assert "did you mean 'Standard_ND96asr_v4'" in r.one("cluster.size-unknown", "warning", "standard_nd96asr_v5").hint


# Every hint below is followed literally and the stack validated again: the rule is gone and no error is new.

def test_a_retired_sizes_hint_keeps_the_infiniband_the_cluster_requires(tmp_path):
    body = "clusters:\n  gpu:\n    size: Standard_NC24s_v3\n    infiniband: required\n"
    d = check(tmp_path, body).of("cluster.size-retired")[0]
    named = d.hint.split("e.g. ")[1].split(" (")[0].split(", ")
    for size in named:
        after = check(tmp_path, body.replace("Standard_NC24s_v3", size))
        assert errors(after) == [], (size, after.diagnostics)


def test_replacement_hints_are_ordered_by_fit(tmp_path):
    """Issue 32: a TensorFlow job on Standard_NC12 (2x K80) got GB200 first. Suggestions go closest first: the same
    GPU model, a priced size before an unpriced (newest, largest) one, the same GPU count, then price per node-hour."""
    body = one_distribution("Standard_NC12", CURATED_ENV, "type: tensorflow\nworker_count: 2\ninstance_count: 2\n")
    r = check(tmp_path, body)
    ib = _sizes_named(r.one("distribution.multinode-without-infiniband", "warning", "instance_count: 2").hint)
    assert ib[0] == "Standard_ND40rs_v2" and ib.index("Standard_ND128isr_NDR_GB200_v6") > ib.index("Standard_ND96isr_H100_v5")
    # the retired size's successors: current NC sizes with its 2 GPUs first, cheapest first
    hint = r.one("cluster.size-retired", "error", "size: Standard_NC12").hint
    assert hint.index("Standard_NC48ads_A100_v4") < hint.index("Standard_NC80adis_H100_v5") < hint.index("Standard_NC64as_T4_v3")
    # the same GPU model comes first: an A100 PCIe cluster is pointed at the A100 InfiniBand sizes
    r = check(tmp_path, one_distribution("Standard_NC96ads_A100_v4", CURATED_ENV,
                                         "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 4\n"))
    ib = _sizes_named(r.one("distribution.multinode-without-infiniband", "warning", "instance_count: 2").hint)
    assert ib[:2] == ["Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4"]


def test_low_priority_on_a_size_azure_runs_only_dedicated_is_an_error(tmp_path):
    """Azure ML answers UnsupportedVMSizeForLowPriority for a low-priority ND96isr_H100_v5 cluster (skus.yaml
    low_priority: false, with its source); the same size dedicated, and an A100 size at low priority, are fine."""
    h100 = "clusters:\n  gpu:\n    size: Standard_ND96isr_H100_v5\n    max_instances: 2\n    tier: low_priority\n"
    d = check(tmp_path, h100).one("cluster.low-priority-unsupported", "error", "tier: low_priority")
    assert "UnsupportedVMSizeForLowPriority" in d.message and "tier: dedicated" in d.hint
    assert not check(tmp_path, h100.replace("low_priority", "dedicated")).of("cluster.low-priority-unsupported")
    a100 = h100.replace("Standard_ND96isr_H100_v5", "Standard_ND96amsr_A100_v4")
    assert not check(tmp_path, a100).of("cluster.low-priority-unsupported")

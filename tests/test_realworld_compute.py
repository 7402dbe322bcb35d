"""The public compute YAMLs of Azure/azureml-examples (tests/realworld/compute/, verbatim, sources in its README)
pasted under `clusters:` of a stack plan clean with --local: the emulator offers Azure ML's default size
Standard_DS3_v2 and the other general-purpose sizes, and a cluster `location` in another region is Azure ML's
preview (a warning saying so), not an error; a region Azure does not have stays an error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from emulator_fixtures import TEST_LOCATION, WORKSPACE_YAML

from infra_cli.azure.provider import AzureProvider
from infra_cli.knowledge.skus import load_catalog
from infra_cli.plan.engine import plan_stack
from infra_cli.stack.load import load_stack

EXAMPLES = Path(__file__).resolve().parent / "realworld" / "compute"

# Each example's verdict: the rules of the plan's own diagnostics (validate's, like cluster.location and
# cluster.ssh-password-inline, are tests/test_paste_compat.py's), all warnings, so the plan has no error. Azure's docs
# (https://learn.microsoft.com/azure/machine-learning/how-to-create-attach-compute-cluster, Limitations): "Compute
# clusters can be created in a different region than your workspace. This functionality is in preview", with
# increased network latency and data transfer costs: the plan's preflight.location-mismatch warns of it.
# cluster-user-identity.yml's resource_id is the example's placeholder: the plan carries it as written.
VERDICTS = {
    "cluster-basic.yml": [],
    "cluster-location.yml": ["preflight.location-mismatch"],
    "cluster-low-priority.yml": [],
    "cluster-minimal.yml": [],
    "cluster-ssh-password.yml": [],
    "cluster-system-identity.yml": [],
    "cluster-user-identity.yml": [],
}


def pasted(text: str) -> tuple[str, str]:
    """The example indented under `clusters:` with its own name as the key, as the README says to paste it."""
    name = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("name:"))
    return "stack: realworld\n" + WORKSPACE_YAML + f"clusters:\n  {name}:\n" + textwrap.indent(text, "    "), name


def plan_of(tmp_path: Path, text: str, clients):
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    return plan_stack(load_stack(path), AzureProvider(clients)).plan


def test_the_folder_holds_the_seven_public_cluster_files():
    assert sorted(p.name for p in EXAMPLES.glob("cluster-*.yml")) == sorted(VERDICTS)
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for name in VERDICTS:
        assert f"cli/resources/compute/{name}" in readme
        assert (EXAMPLES / name).read_text(encoding="utf-8").startswith("$schema: ")  # verbatim, no header added


@pytest.mark.parametrize("example", sorted(VERDICTS))
def test_public_cluster_file_plans_with_its_intended_verdict(tmp_path, clients, example):
    text, name = pasted((EXAMPLES / example).read_text(encoding="utf-8"))
    plan = plan_of(tmp_path, text, clients)
    found = sorted(d.rule for d in plan.diagnostics)
    assert found == sorted(VERDICTS[example]), plan.diagnostics
    assert not plan.has_errors()
    (change,) = [c for c in plan.resource_changes if c.address == f"cluster.{name}"]
    assert change.actions == ["create"]
    assert change.after["size"].lower() == "standard_ds3_v2"  # written or Azure ML's default


def test_cross_region_warning_says_it_is_a_preview_and_points_at_the_location(tmp_path, clients):
    text, _ = pasted((EXAMPLES / "cluster-location.yml").read_text(encoding="utf-8"))
    plan = plan_of(tmp_path, text, clients)
    (d,) = [d for d in plan.diagnostics if d.rule == "preflight.location-mismatch"]
    assert d.severity == "warning" and "preview" in d.message and "westus" in d.message
    assert d.line == text.splitlines().index("    location: westus") + 1
    assert "how-to-create-attach-compute-cluster" in d.hint


def test_a_region_azure_does_not_have_is_an_error(tmp_path, clients):
    text, _ = pasted((EXAMPLES / "cluster-location.yml").read_text(encoding="utf-8").replace("westus", "westmars"))
    plan = plan_of(tmp_path, text, clients)
    (d,) = [d for d in plan.diagnostics if d.rule == "preflight.location-unknown"]
    assert d.severity == "error" and "westmars" in d.message and plan.has_errors()


@pytest.mark.parametrize("size", ["Standard_DS15_v2", "Standard_D4s_v3", "Standard_D8ds_v4", "Standard_D16s_v5",
                                  "Standard_E8s_v3", "Standard_F16s_v2"])
def test_general_purpose_sizes_plan_clean_without_gpu_or_infiniband_errors(tmp_path, clients, size):
    text = "stack: cpu\n" + WORKSPACE_YAML + f"clusters:\n  cpu:\n    size: {size}\n    max_instances: 4\n"
    plan = plan_of(tmp_path, text, clients)
    assert plan.diagnostics == [] and not plan.has_errors()


def test_general_purpose_sizes_are_known_with_sources_and_quota_families():
    catalog = load_catalog()
    ds3 = catalog.get("STANDARD_DS3_v2")  # as the azureml-examples write it
    assert (ds3.vcpus, ds3.memory_gib, ds3.family, ds3.gpus, ds3.rdma) == (4, 14, "standardDSv2Family", 0, False)
    general = catalog.general_purpose()
    assert {s.family for s in general} >= {"standardDv2Family", "standardDSv2Family", "standardDv3Family",
                                           "standardDSv3Family", "standardDDv4Family", "standardDDSv4Family",
                                           "standardDv5Family", "standardDSv5Family", "standardESv3Family",
                                           "standardFSv2Family"}
    assert all(s.source.startswith("https://learn.microsoft.com/azure/virtual-machines/sizes/") for s in general)
    # `infra skus` stays the GPU/HPC catalog
    assert "Standard_DS3_v2" not in catalog.names()
    assert catalog.knows_region(TEST_LOCATION) and catalog.knows_region("West US") and not catalog.knows_region("x")


def test_the_emulator_offers_general_purpose_sizes_in_every_region_it_has(emulator):
    world = emulator.backend.world if hasattr(emulator, "backend") else None
    if world is None:
        from infra_cli.emulator.world import load_world
        world = load_world()
    for region in world.regions:
        assert world.offer(region, "Standard_DS3_v2") is not None, region
    assert {"eastus", "westus2", "southcentralus", "westeurope", "westus"} <= set(world.regions)

"""infra plan --check-images: custom images' `requires:` proven from their layers (real registry, no daemon)."""

from __future__ import annotations

from emulator_fixtures import TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE

from infra_cli.azure.provider import AzureProvider
from infra_cli.plan.engine import plan_stack
from infra_cli.stack.load import load_stack

STACK = f"""
stack: imgs
workspace: {{subscription_id: {TEST_SUBSCRIPTION}, resource_group: {TEST_RESOURCE_GROUP}, name: {TEST_WORKSPACE}, location: {TEST_LOCATION}}}
clusters:
  gpu: {{size: Standard_ND96asr_v4, max_instances: 2}}
environments:
  good: {{image: "REGISTRY/test/openmpi:oci", requires: ["openmpi>=4.1"]}}
  mpich: {{image: "REGISTRY/test/mpich:oci", requires: ["openmpi"]}}
  gone: {{image: "REGISTRY/test/nothing-here:oci", requires: ["mpi"]}}
"""


def test_check_images_reports_met_unmet_and_unreadable(tmp_path, clients, images):
    path = tmp_path / "stack.yaml"
    path.write_text(STACK.replace("REGISTRY", images.registry.host))
    loaded = load_stack(path)
    without = plan_stack(loaded, AzureProvider(clients))
    assert not [d for d in without.plan.diagnostics if d.rule.startswith("plan.image")]
    outcome = plan_stack(loaded, AzureProvider(clients), check_images=True)
    by_rule = {}
    for d in outcome.plan.diagnostics:
        by_rule.setdefault((d.rule, d.severity), []).append(d)
    met = by_rule[("plan.image-requirement", "info")]
    assert any("test/openmpi" in d.message and "openmpi>=4.1" in d.message for d in met)
    unmet = by_rule[("plan.image-requirement", "error")]
    assert any("test/mpich" in d.message for d in unmet) and unmet[0].line is not None
    assert any("nothing-here" in d.message for d in by_rule[("plan.image-unreadable", "error")])
    assert outcome.plan.has_errors()


def test_a_build_environment_is_said_not_checked(tmp_path, clients):
    """A `build:` environment has no image until Azure ML builds it: --check-images said nothing of it; now one
    info line at its `build:` says it was not checked, and how to check the built image."""
    path = tmp_path / "stack.yaml"
    path.write_text(STACK.split("environments:")[0] + "environments:\n"
                    "  built: {build: {template: openmpi-rdma}, requires: [openmpi>=4.1, ibverbs]}\n")
    outcome = plan_stack(load_stack(path), AzureProvider(clients), check_images=True)
    (said,) = [d for d in outcome.plan.diagnostics if d.rule.startswith("plan.image")]
    assert (said.rule, said.severity, said.line) == ("plan.image-not-checked", "info", 7), said
    assert "requires (openmpi>=4.1, ibverbs) not checked against an image" in said.message
    assert "template openmpi-rdma" in said.message and "`infra image check IMAGE --require SPEC`" in said.hint
    assert not outcome.plan.has_errors()

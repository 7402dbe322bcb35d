"""One-line mutations no test noticed (issue 40's audit): each test below names in its docstring the mutation it
holds, and fails when that line is mutated (each was checked by making the mutation by hand).

Where a guard is a boundary, both sides of it are tested: the last value it lets through and the first it refuses.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from emulator_fixtures import TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE, WORKSPACE_YAML
from rules_fixtures import A100, CURATED_ENV, check, one_distribution
from test_variables import infra

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import parse_stack
from infra_cli.stack.variables import convert

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = "clusters:\n  gpu: {size: Standard_ND96asr_v4, max_instances: 2}\n"


def _errors(text: str) -> list[tuple[str, str, int | None]]:
    try:
        parse_stack(text, "s.yaml", {})
    except DiagnosticError as exc:
        return [(d.rule, d.message, d.line) for d in exc.diagnostics]
    return []


# ---- a bool is not a number ------------------------------------------------------------------------------------

def test_a_bool_is_not_a_number_of_nodes():
    """Mutation held: `nodes: true` accepted as a number (stack/variables.py convert: `not isinstance(value,
    bool) and` dropped from the number check; stack/model.py `_number_not_bool` dropped from Count). YAML's true is
    Python's 1: a variable `nodes` of type number given true, or a node count written true, would run 1 node."""
    assert convert(True, "number", text=False) == (False, True)
    assert convert(False, "number", text=False)[0] is False
    assert convert(2, "number", text=False) == (True, 2)   # the other side: a number is one
    assert convert("true", "number", text=True)[0] is False   # --var nodes=true
    declared = "stack: s\n" + WORKSPACE_YAML + "variables:\n  nodes: {type: number, default: true}\n" + CLUSTER
    assert _errors(declared) == [("variable.type", "the default of variable 'nodes' is not a number", 8)]
    assert _errors(declared.replace("default: true", "default: 2")) == []
    for field in ("max_instances", "min_instances"):
        text = "stack: s\n" + WORKSPACE_YAML + f"clusters:\n  gpu: {{size: Standard_ND96asr_v4, {field}: true}}\n"
        [(rule, message, line)] = _errors(text)
        assert rule == "stack.invalid" and "not true/false" in message and line == 8, (rule, message)
    nodes = one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: true\n")
    with pytest.raises(DiagnosticError, match="not true/false"):
        parse_stack("stack: s\n" + WORKSPACE_YAML + nodes, "s.yaml", {})


# ---- infra output --raw ----------------------------------------------------------------------------------------

def test_output_raw_refuses_a_list_and_a_map_as_terraform_does():
    """Mutation held: `infra output STACK NAME --raw` accepting a list (commands/views/outputs.py raw_refusal: a
    list let through, or only `dict` refused). Terraform's -raw prints only a string, number or bool; a list or a
    map is an error naming -json. (validate refuses a list or map as an output's value today, so the CLI cannot
    reach one: the guard is held here, and its CLI side by the next test.)"""
    from infra_cli.commands.views.outputs import raw_refusal

    assert raw_refusal(["gpu", "cpu"]) == "is a list"
    assert raw_refusal({"name": "gpu"}) == "is a map"
    assert raw_refusal(("gpu",)) == "is a tuple"
    assert raw_refusal(None) == "has no value (is the stack applied?)"
    for scalar in ("gpu", "", 2, 0.55, True, False):   # the other side: printed bare
        assert raw_refusal(scalar) is None, scalar


def test_output_raw_of_a_value_it_refuses_is_an_error_from_the_cli(tmp_path):
    """The CLI side of -raw's refusal (commands/state.py output: the `raw_refusal` check dropped would print
    `None`): after an apply without a smoke, the smoke's bus bandwidth has no value; --raw refuses it, exit 1,
    and a string prints bare."""
    stack = tmp_path / "s.yaml"
    stack.write_text("stack: rawvalue\n" + WORKSPACE_YAML + CLUSTER + "environments:\n"
                     '  train: {image: "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"}\n'
                     "distributions:\n  ddp: {cluster: gpu, environment: train, type: pytorch, instance_count: 2, "
                     "process_count_per_instance: 8}\noutputs:\n"
                     '  name: {value: "${cluster.gpu.name}"}\n  busbw: {value: "${smoke.ddp.busbw_gbps}"}\n')
    state = tmp_path / "state"
    applied = infra("apply", str(stack), "--local", "--auto-approve", "--no-smoke", state=state)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    raw = infra("output", str(stack), "busbw", "--raw", "--local", state=state)
    assert raw.returncode == 1 and raw.stdout == "" and "Traceback" not in raw.stderr, raw.stdout + raw.stderr
    assert ("error[output.raw]: output 'busbw' has no value (is the stack applied?): --raw prints only a string, "
            "number or bool") in raw.stderr, raw.stderr
    raw = infra("output", str(stack), "name", "--raw", "--local", state=state)
    assert raw.returncode == 0 and raw.stdout == "gpu\n", raw.stdout + raw.stderr


# ---- ARM paging ------------------------------------------------------------------------------------------------

def test_a_next_link_without_api_version_is_followed_with_ours(emulator, clients):
    """Mutation held: ARM `nextLink` pages losing `api-version` (azure/arm.py ArmClient.pages: the nextLink's own
    query taken without adding our api-version back). Some resource providers' nextLink carries only its
    $skipToken; ARM refuses a request without api-version, so the list's second page would be an error."""
    from infra_cli.azure.environment_versions import API_ENVIRONMENTS

    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, TEST_LOCATION)
    emulator.backend.page_size = 2
    emulator.backend.next_link_api_version = False
    versions = clients.versions
    for v in range(1, 6):
        versions.register("paged", str(v), {"image": f"mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:{v}"})
    emulator.stats.reset()
    listed = clients.arm.list(f"{clients.workspace_path}/environments/paged/versions", API_ENVIRONMENTS)
    assert sorted(item["name"] for item in listed) == ["1", "2", "3", "4", "5"]
    pages = [r for r in emulator.stats.records if r.path.endswith("/environments/paged/versions")]
    assert [r.status for r in pages] == [200, 200, 200]   # pages of 2, 2, 1: each asked with an api-version


# ---- an environment version's tags rewritten -----------------------------------------------------------------

class _SeenPuts:
    """The real ArmClient, keeping a copy of each PUT body it sends on (the request still reaches the emulator)."""

    def __init__(self, arm):
        self._arm, self.bodies = arm, []

    def __getattr__(self, name):
        return getattr(self._arm, name)

    def put(self, path, api_version, body, **query):
        self.bodies.append(json.loads(json.dumps(body)))
        return self._arm.put(path, api_version, body, **query)


def test_a_tag_rewrite_sends_no_read_only_property_back(emulator, clients):
    """Mutation held: read-only properties sent back on an environment tag rewrite (azure/environment_versions.py
    rewrite: the `k not in _READ_ONLY` filter dropped). Azure's EnvironmentVersionProperties marks environmentType
    and provisioningState readOnly (https://learn.microsoft.com/rest/api/azureml/environment-versions): the
    version read back carries them, the PUT that rewrites its tags must not."""
    from infra_cli.azure.environment_versions import EnvironmentVersions

    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, TEST_LOCATION)
    image = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:1"
    seen = _SeenPuts(clients.arm)
    versions = EnvironmentVersions(seen, clients.workspace_path)
    versions.register("tagged", "1", {"image": image, "tags": {"team": "ml"}})
    read = versions.get("tagged", "1")["properties"]
    assert read["environmentType"] == "UserCreated"   # what the GET answers: the rewrite must leave it out
    seen.bodies.clear()
    versions.rewrite("tagged", "1", tags={"team": "ml", "infra.stack": "s"})
    versions.rewrite("tagged", "1", archived=True)
    assert len(seen.bodies) == 2
    for body in seen.bodies:
        assert not {"environmentType", "provisioningState"} & set(body["properties"]), body
        assert body["properties"]["image"] == image   # the content is sent back as it was
    after = versions.get("tagged", "1")["properties"]
    assert after["tags"] == {"team": "ml", "infra.stack": "s"} and after["isArchived"] is True


# ---- the InfiniBand warning's boundary -----------------------------------------------------------------------

@pytest.mark.parametrize("nodes, warned", [(1, False), (2, True)])
def test_disabling_infiniband_warns_from_two_nodes(tmp_path, nodes, warned):
    """Mutation held: a one-node `infiniband-disabled` warning boundary (validate/rules/launch.py
    distribution_ib_disabled: `instance_count > 1` as `>= 1`, or as `> 2`). One node's ranks talk over NVLink and
    shared memory, never InfiniBand: disabling it there costs nothing and is no warning; from two nodes it is."""
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: {nodes}\n"
                                                          "process_count_per_instance: 8\n"
                                                          "environment_variables: {NCCL_IB_DISABLE: 1}\n"))
    if warned:
        r.one("distribution.infiniband-disabled", "warning", "{NCCL_IB_DISABLE")
    else:
        assert not r.of("distribution.infiniband-disabled"), r.diagnostics


# ---- the plan file's depth bound -------------------------------------------------------------------------------

def test_the_plan_file_depth_bound_is_exact(tmp_path):
    """Mutation held: the plan-file depth bound off by one (plan/planfile.py `_depth_over`: `depth > limit` as
    `depth >= limit` refuses a file at the bound; as `depth > limit + 1` reads one a level over it). Read here
    directly; tests/hostile/test_readers_bounded.py reads the same two files through `infra show`."""
    from infra_cli.plan.planfile import MAX_PLAN_DEPTH, read_plan_file

    spec = importlib.util.spec_from_file_location("readers_bounded", ROOT / "tests/hostile/test_readers_bounded.py")
    readers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(readers)
    nested_plan = readers.nested_plan

    # the plan's own object is level 1, nested_plan's n objects under "deep" levels 2 to n + 1
    for n, refused in ((MAX_PLAN_DEPTH - 1, False), (MAX_PLAN_DEPTH, True)):
        path = tmp_path / f"{n}.plan"
        path.write_text(nested_plan(n, None)["text"])
        with pytest.raises(DiagnosticError) as caught:
            read_plan_file(path, key=None)
        message = caught.value.diagnostics[0].message
        if refused:
            assert message == f"not an infra plan file: nested more than {MAX_PLAN_DEPTH} levels deep", message
        else:
            assert message == "plan file is missing 'workspace'", message   # read past its depth and its seals

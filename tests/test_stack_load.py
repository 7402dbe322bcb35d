"""The stack file format: every field, ${VAR} interpolation, and every way a file can be wrong.

In-process tests use parse_stack/load_stack; the CLI tests run the real `python -m infra_cli validate` on
the bad stacks in tests/fixtures/bad_stacks/ and check exit code 1, file:line:column, a hint, no traceback.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.stack.load import load_stack, parse_stack

ROOT = Path(__file__).resolve().parent.parent
BAD = ROOT / "tests" / "fixtures" / "bad_stacks"
WORKSPACE = ("workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, "
             "location: eastus}\n")


def errors_of(text: str, environ: dict[str, str] | None = None) -> list[Diagnostic]:
    with pytest.raises(DiagnosticError) as exc:
        parse_stack(textwrap.dedent(text), "s.yaml", environ or {})
    assert exc.value.diagnostics and all(d.file == "s.yaml" and d.hint for d in exc.value.diagnostics)
    return exc.value.diagnostics


def one_error(text: str, environ: dict[str, str] | None = None) -> Diagnostic:
    found = errors_of(text, environ)
    assert len(found) == 1, found
    return found[0]


# ---- every field ----------------------------------------------------------------------------------------

FULL = """\
stack: full-stack
workspace:
  subscription_id: 0A1B2C3D-0000-0000-0000-000000000000
  resource_group: rg
  name: mlw
  location: West Europe
clusters:
  gpu:
    type: amlcompute
    size: Standard_ND96isr_H100_v5
    tier: low_priority
    min_instances: 1
    max_instances: 4
    idle_time_before_scale_down: 600
    enable_node_public_ip: false
    ssh_public_access_enabled: true
    ssh_settings: {admin_username: azureuser, ssh_key_value: "${KEY}", admin_password: "${PASSWORD}"}
    network_settings: {vnet_name: vnet, subnet: snet}
    identity:
      type: system_assigned,user_assigned
      user_assigned_identities: [{resource_id: /subscriptions/x/identity}]
    location: westeurope
    tags: {team: ml}
    description: H100s
    infiniband: required
    lifecycle: {prevent_destroy: true}
environments:
  curated: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
  image:
    image: myacr.azurecr.io/x:1
    conda_file: conda.yml
    requires: [openmpi>=4.1, ibverbs, nccl>=2.18]
    version: 2
    tags: {a: b}
    description: custom
    os_type: linux
  built:
    build: {template: openmpi-rdma, parameters: {pip_packages: [deepspeed]}}
  own:
    build: {path: ctx, dockerfile_path: Dockerfile.gpu}
distributions:
  ddp:
    cluster: gpu
    environment: curated
    type: pytorch
    instance_count: 4
    process_count_per_instance: 8
    launcher: per-process
    framework: transformers
    environment_variables: {NCCL_DEBUG: INFO, NCCL_IB_DISABLE: 0, VERBOSE: true}
    smoke: {enabled: true, busbw_fraction: 0.9, max_message_bytes: 1048576, steps: 10, timeout_minutes: 20,
            experiment_name: smoke}
    command: python train.py --local_rank $$LOCAL_RANK
    code: ./src
  tf:
    cluster: gpu
    environment: image
    type: tensorflow
    worker_count: 2
    parameter_server_count: 1
"""


def test_every_field_of_the_format_loads():
    stack, _ = parse_stack(FULL, "full.yaml", {"KEY": "ssh-rsa AAAA", "PASSWORD": "pw"})
    assert stack.workspace.subscription_id == "0a1b2c3d-0000-0000-0000-000000000000"
    assert stack.workspace.location == "westeurope"
    c = stack.clusters["gpu"]
    assert (c.size, c.tier, c.min_instances, c.max_instances, c.idle_time_before_scale_down) == \
        ("Standard_ND96isr_H100_v5", "low_priority", 1, 4, 600)
    assert c.enable_node_public_ip is False and c.ssh_public_access_enabled is True
    assert c.ssh_settings.ssh_key_value.get_secret_value() == "ssh-rsa AAAA"
    assert "pw" not in repr(c.ssh_settings) and "AAAA" not in repr(c)  # secrets stay masked
    assert c.network_settings.subnet == "snet" and c.identity.user_assigned_identities[0].resource_id
    assert (c.location, c.tags, c.description, c.infiniband, c.lifecycle.prevent_destroy) == \
        ("westeurope", {"team": "ml"}, "H100s", "required", True)
    envs = stack.environments
    assert [envs[n].kind for n in ("curated", "image", "built", "own")] == ["curated", "image", "build", "build"]
    assert envs["image"].version == "2" and envs["image"].requires[-1] == "nccl>=2.18"
    assert envs["built"].build.parameters == {"pip_packages": ["deepspeed"]}
    assert envs["own"].build.dockerfile_path == "Dockerfile.gpu"
    d = stack.distributions["ddp"]
    assert (d.instance_count, d.process_count_per_instance, d.launcher, d.framework) == \
        (4, 8, "per-process", "transformers")
    assert d.environment_variables == {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "0", "VERBOSE": "true"}
    assert (d.smoke.busbw_fraction, d.smoke.max_message_bytes, d.smoke.steps, d.smoke.timeout_minutes) == \
        (0.9, 1048576, 10, 20)
    assert d.command == "python train.py --local_rank $LOCAL_RANK" and d.code == "./src"
    tf = stack.distributions["tf"]
    assert (tf.type, tf.worker_count, tf.parameter_server_count) == ("tensorflow", 2, 1)


def test_defaults():
    stack, _ = parse_stack("stack: s\n" + WORKSPACE + "clusters: {gpu: {size: Standard_ND96asr_v4}}\n", "s.yaml", {})
    c = stack.clusters["gpu"]
    assert (c.tier, c.min_instances, c.max_instances, c.idle_time_before_scale_down, c.enable_node_public_ip) == \
        ("dedicated", 0, 1, 120, True)
    assert c.infiniband is None and c.lifecycle.prevent_destroy is False


# ---- interpolation --------------------------------------------------------------------------------------

def test_interpolation_substitutes_environment_variables():
    text = "stack: s\n" + WORKSPACE + "clusters:\n  gpu:\n    size: ${SIZE}\n    max_instances: ${N}\n" \
           "    description: ${A}-and-${B}\n"
    stack, _ = parse_stack(text, "s.yaml", {"SIZE": "Standard_ND96asr_v4", "N": "3", "A": "x", "B": "y"})
    assert stack.clusters["gpu"].size == "Standard_ND96asr_v4"
    assert stack.clusters["gpu"].max_instances == 3
    assert stack.clusters["gpu"].description == "x-and-y"


def test_double_dollar_escapes():
    text = "stack: s\n" + WORKSPACE + "clusters:\n  gpu: {size: X, description: 'cost $$5 ${NAME} $${NAME} $HOME'}\n"
    stack, _ = parse_stack(text, "s.yaml", {"NAME": "n"})
    assert stack.clusters["gpu"].description == "cost $5 n ${NAME} $HOME"


def test_azureml_expressions_pass_through_and_later_references_keep_their_positions():
    """A command pasted from an Azure ML job keeps `${{inputs.x}}` (Azure ML resolves it); a `${NAME}` after it
    is still interpolated, and an error after it still points at its own column."""
    text = ("stack: s\n" + WORKSPACE + "clusters:\n  gpu:\n    size: X\n"
            "    description: 'a ${{inputs.epochs}} b ${{ outputs.model }} ${N}'\n")
    stack, _ = parse_stack(text, "s.yaml", {"N": "3"})
    assert stack.clusters["gpu"].description == "a ${{inputs.epochs}} b ${{ outputs.model }} 3"
    d = one_error("stack: s\n" + WORKSPACE + "clusters:\n  gpu:\n    size: X\n"
                  "    description: '${{inputs.x}} ${MISSING}'\n")
    assert (d.rule, d.line, d.column) == ("stack.interpolation", 6, 33) and "MISSING" in d.message


def test_missing_variable_points_at_the_reference():
    d = one_error("stack: s\n" + WORKSPACE + "clusters:\n  gpu:\n    size: Standard_${SERIES}_v4\n")
    assert (d.rule, d.line, d.column) == ("stack.interpolation", 5, 20)
    assert "SERIES" in d.message and "export SERIES" in d.hint


def test_missing_variables_in_a_block_scalar_point_at_each_line():
    found = errors_of("stack: s\n" + WORKSPACE + "clusters:\n  gpu:\n    size: X\n    description: |\n"
                      "      first ${ONE}\n      second ${TWO}\n")
    assert [(d.line, d.column) for d in found] == [(7, 13), (8, 14)]


@pytest.mark.parametrize("value, message", [("${}", "not a valid variable"), ("${1X}", "not a valid variable"),
                                            ("${OPEN", "no closing")])
def test_malformed_references(value, message):
    d = one_error("stack: s\n" + WORKSPACE + f"clusters:\n  gpu: {{size: '{value}'}}\n")
    assert d.rule == "stack.interpolation" and message in d.message and (d.line, d.column) == (4, 16)


def test_the_process_environment_is_the_default(monkeypatch, tmp_path):
    monkeypatch.setenv("INFRA_TEST_SIZE", "Standard_ND96asr_v4")
    p = tmp_path / "s.yaml"
    p.write_text("stack: s\n" + WORKSPACE + "clusters: {gpu: {size: '${INFRA_TEST_SIZE}'}}\n")
    assert load_stack(p).stack.clusters["gpu"].size == "Standard_ND96asr_v4"


# ---- errors ---------------------------------------------------------------------------------------------

def test_unknown_key_suggests_the_nearest_field():
    d = one_error("stack: s\n" + WORKSPACE + "clusters:\n  gpu:\n    size: X\n    idle_time_before_scaledown: 5\n")
    assert (d.rule, d.line, d.column) == ("stack.unknown-key", 6, 5)
    assert d.hint == "did you mean 'idle_time_before_scale_down'?"


@pytest.mark.parametrize("path, key, expected", [
    ("workspace", "locaton", "location"),
    ("smoke", "bussbw_fraction", "busbw_fraction"),
    ("ssh_settings", "ssh_key", "ssh_key_value"),
    ("top", "distribution", "distributions"),
])
def test_unknown_keys_at_every_level(path, key, expected):
    texts = {
        "workspace": "stack: s\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: r,"
                     f" name: w, location: x, {key}: y}}\n",
        "smoke": "stack: s\n" + WORKSPACE + "distributions:\n  d: {cluster: c, environment: e, type: pytorch, "
                 f"smoke: {{{key}: 1}}}}\n",
        "ssh_settings": "stack: s\n" + WORKSPACE + f"clusters:\n  gpu: {{size: X, ssh_settings: {{{key}: k}}}}\n",
        "top": "stack: s\n" + WORKSPACE + f"{key}: {{}}\n",
    }
    d = one_error(texts[path])
    assert d.rule == "stack.unknown-key" and expected in d.hint


def test_unknown_key_with_nothing_close_lists_the_allowed_keys():
    d = one_error("stack: s\n" + WORKSPACE + "clusters:\n  gpu: {size: X, zzz: 1}\n")
    assert "allowed here:" in d.hint and "max_instances" in d.hint
    # keys as a user writes them in YAML (a pasted compute.yml's `$schema`), not the model's attribute names
    assert "$schema" in d.hint and "schema_url" not in d.hint
    assert one_error("stack: s\n" + WORKSPACE + "clusters:\n  gpu: {size: X, schema: 1}\n").hint == "did you mean '$schema'?"


@pytest.mark.parametrize("field, value, hint", [
    ("max_instances", "two", "whole number"),
    ("enable_node_public_ip", "maybe", "true or false"),
    ("tier", "spot", "one of the values"),
    ("tags", "[a, b]", "mapping"),
    ("size", "[a]", "text"),
    ("min_instances", "-1", "fix the value"),
])
def test_wrong_types_point_at_the_value(field, value, hint):
    extra = "" if field == "size" else "\n    size: X"
    d = one_error("stack: s\n" + WORKSPACE + f"clusters:\n  gpu:{extra}\n    {field}: {value}\n")
    assert d.rule == "stack.invalid" and hint in d.hint
    assert d.line == (6 if extra else 5) and d.column == 7 + len(field)


def test_cross_field_checks_of_the_model():
    d = one_error("stack: s\n" + WORKSPACE + "clusters:\n  gpu: {size: X, min_instances: 3, max_instances: 2}\n")
    assert "min_instances (3) exceeds max_instances (2)" in d.message and d.line == 4
    d = one_error("stack: s\n" + WORKSPACE + "environments:\n  e: {image: a, curated: 'azureml:b@latest'}\n")
    assert "exactly one of" in d.message
    d = one_error("stack: s\n" + WORKSPACE + "environments:\n  e: {build: {}}\n")
    assert "exactly one of `template` or `path`" in d.message


def test_invalid_subscription_id_and_stack_name():
    found = errors_of("stack: Bad_Name\nworkspace: {subscription_id: nope, resource_group: r, name: w, location: x}\n")
    assert {d.line for d in found} == {1, 2}
    assert any("GUID" in d.message for d in found)


def test_secret_values_never_appear_in_errors():
    d = one_error("stack: s\n" + WORKSPACE + "clusters:\n  gpu:\n    size: X\n"
                  "    ssh_settings: {admin_password: [hunter2-secret]}\n")
    assert "hunter2" not in d.message + (d.hint or "")


def test_missing_required_key_points_at_its_parent():
    # (a cluster's size is not required: Azure ML defaults it, see tests/test_paste_compat.py)
    d = one_error("stack: s\n" + WORKSPACE + "distributions:\n  job:\n    cluster: gpu\n    type: mpi\n")
    assert (d.rule, d.line, d.column) == ("stack.missing-key", 4, 3)
    assert "distributions.job.environment is required" in d.message and d.hint == "add `environment:` here"


def test_duplicate_key_names_the_first_definition():
    d = one_error("stack: s\n" + WORKSPACE + "clusters:\n  gpu:\n    size: X\n    size: Y\n")
    assert (d.rule, d.line, d.column) == ("stack.duplicate-key", 6, 5) and "line 5" in d.message


def test_duplicate_map_entries_are_caught_too():
    d = one_error("stack: s\n" + WORKSPACE + "clusters:\n  gpu: {size: X}\n  gpu: {size: Y}\n")
    assert d.rule == "stack.duplicate-key" and d.line == 5


def test_syntax_error_position():
    d = one_error("stack: s\nworkspace:\n  name: [unclosed\n")
    assert d.rule == "stack.syntax" and d.line is not None and d.column is not None


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n"])
def test_empty_file(text):
    assert one_error(text).rule == "stack.empty"


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "42\n"])
def test_top_level_must_be_a_mapping(text):
    d = one_error(text)
    assert d.rule == "stack.invalid" and (d.line, d.column) == (1, 1)


def test_several_documents_are_a_syntax_error():
    assert one_error("stack: a\n---\nstack: b\n").rule == "stack.syntax"


def test_recursive_alias_is_refused():
    assert one_error("stack: s\nx: &a\n  - *a\n").rule == "stack.syntax"


def test_alias_bomb_is_refused():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    d = one_error("\n".join(lines) + "\n")
    assert d.rule == "stack.syntax" and "aliases" in d.hint


def test_merge_keys_are_refused():
    assert one_error("base: &b {size: X}\nstack: s\nc:\n  <<: *b\n").rule == "stack.syntax"


def test_nonexistent_file():
    with pytest.raises(DiagnosticError) as exc:
        load_stack("/no/such/stack.yaml")
    (d,) = exc.value.diagnostics
    assert d.rule == "stack.not-found" and d.file == "/no/such/stack.yaml" and d.hint


def test_unreadable_file(tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"stack: caf\xe9\n")
    for path in (bad, tmp_path):  # not UTF-8; a directory
        with pytest.raises(DiagnosticError) as exc:
            load_stack(path)
        assert exc.value.diagnostics[0].rule == "stack.unreadable"


# ---- through the real CLI -------------------------------------------------------------------------------

LOCATED = re.compile(r"^(?P<file>[^\s:]+\.yaml):(?P<line>\d+):(?P<column>\d+): error\[(?P<rule>[a-z.-]+)\]", re.M)
EXPECTED_RULES = {
    "syntax_error.yaml": "stack.syntax",
    "wrong_type.yaml": "stack.invalid",
    "unknown_key.yaml": "stack.unknown-key",
    "duplicate_key.yaml": "stack.duplicate-key",
    "dangling_reference.yaml": "distribution.dangling-reference",
    "ineligible_size.yaml": "cluster.infiniband-ineligible",
    "multinode_no_ib.yaml": "distribution.multinode-without-infiniband",
    "mpi_without_openmpi.yaml": "distribution.mpi-missing",
    "missing_variable.yaml": "stack.interpolation",
    "top_level_list.yaml": "stack.invalid",
    "empty.yaml": "stack.empty",
    "missing_key.yaml": "stack.missing-key",
}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=ROOT)


def test_every_bad_fixture_is_listed():
    assert sorted(p.name for p in BAD.glob("*.yaml")) == sorted(EXPECTED_RULES)


def test_bad_stacks_through_the_cli():
    """One process for all files: each gets its located error and hint; exit 1; no traceback."""
    files = [str(BAD / name) for name in sorted(EXPECTED_RULES)]
    r = run_cli("validate", *files)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    located = {Path(m["file"]).name: m["rule"] for m in LOCATED.finditer(r.stderr)}
    for name, rule in EXPECTED_RULES.items():
        assert located.get(name) == rule or f"{name}:" in r.stderr and f"error[{rule}]" in r.stderr, name
    assert r.stderr.count("  hint: ") >= len(files)
    assert f"{len(files)} stack file(s) invalid" in r.stderr


@pytest.mark.parametrize("name", ["syntax_error.yaml", "unknown_key.yaml", "mpi_without_openmpi.yaml"])
def test_each_bad_stack_alone_exits_1(name):
    r = run_cli("validate", str(BAD / name))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    m = LOCATED.search(r.stderr)
    assert m and m["rule"] == EXPECTED_RULES[name]


def test_bad_stacks_as_json():
    r = run_cli("validate", "--json", str(BAD / "unknown_key.yaml"), "/no/such.yaml")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    out = json.loads(r.stdout)["diagnostics"]
    assert [d["rule"] for d in out] == ["stack.unknown-key", "stack.not-found"]
    assert all(list(d) == ["severity", "rule", "message", "file", "line", "column", "hint"] for d in out)
    assert (out[0]["line"], out[0]["column"], out[0]["hint"]) == (6, 5, "did you mean 'max_instances'?")


def test_nonexistent_file_through_the_cli():
    r = run_cli("validate", "no/such/stack.yaml")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "no/such/stack.yaml: error[stack.not-found]" in r.stderr and "hint:" in r.stderr


def test_empty_sections_mean_none():
    stack, _ = parse_stack("stack: s\n" + WORKSPACE + "clusters:\nenvironments:\ndistributions:\n", "s.yaml", {})
    assert stack.clusters == stack.environments == stack.distributions == {}


def test_unquoted_decimal_version_is_refused():
    d = one_error("stack: s\n" + WORKSPACE + "environments:\n  e: {image: x, version: 1.10}\n")
    assert "quotes" in d.message and (d.line, d.column) == (4, 26)
    stack, _ = parse_stack("stack: s\n" + WORKSPACE + "environments:\n  e: {image: x, version: '1.10'}\n", "s", {})
    assert stack.environments["e"].version == "1.10"


@pytest.mark.parametrize("section, value, expected", [
    # An empty source once read as "no source" and uploaded the current directory as a build context.
    ("environments:\n  e: {curated: ''}\n", "''", "must not be empty"),
    ("environments:\n  e: {image: '  '}\n", "'  '", "must not be empty"),
    ("environments:\n  e: {build: {path: ''}}\n", "''", "must not be empty"),
    ("environments:\n  e: {curated: str}\n", "str", "is not a curated environment reference"),
    ("environments:\n  e: {curated: 'azureml:Name'}\n", "'azureml:Name'", "azureml:NAME@latest"),
    ("clusters:\n  gpu: {size: X, max_instances: true}\n", "true", "not true/false"),
    ("clusters:\n  gpu: {size: X, idle_time_before_scale_down: 1000000000000000000000}\n", "1000000000000000000000",
     "less than or equal to 2147483647"),
    ("clusters:\n  gpu: {size: ''}\n", "''", "must not be empty"),
])
def test_empty_and_out_of_range_values_are_refused_where_written(section, value, expected):
    text = "stack: s\n" + WORKSPACE + section
    d = one_error(text)
    assert d.rule == "stack.invalid" and expected in d.message, d
    line = text.splitlines()[d.line - 1]
    assert line[d.column - 1:].startswith(value), (line, d.column)


def test_curated_references_azure_ml_resolves_are_accepted():
    for ref in ("azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest", "azureml:my-env:3",
                "azureml://registries/azureml/environments/acpt-pytorch-2.2-cuda12.1/versions/19",
                "azureml://registries/azureml/environments/acpt-pytorch-2.2-cuda12.1/labels/latest"):
        stack, _ = parse_stack("stack: s\n" + WORKSPACE + f"environments:\n  e: {{curated: '{ref}'}}\n", "s.yaml", {})
        assert stack.environments["e"].curated == ref


@pytest.mark.parametrize("tagged, expected", [
    ("!!binary abc", "unsupported YAML tag"),
    ("!!python/object:os.system ls", "unsupported YAML tag"),
    ("!custom x", "unsupported YAML tag '!custom'"),
    ("!!int abc", "'abc' is not a valid int"),
    ("!!float abc", "'abc' is not a valid float"),
])
def test_yaml_tags_beyond_plain_values_are_refused(tagged, expected):
    d = one_error(f"stack: s\nworkspace: {{subscription_id: 00000000-0000-0000-0000-000000000000, "
                  f"resource_group: rg, name: {tagged}, location: eastus}}\n")
    assert d.rule == "stack.syntax" and expected in d.message and d.line == 2


def test_dates_stay_the_text_written():
    stack, _ = parse_stack("stack: s\n" + WORKSPACE + "environments:\n  e: {image: 'a:1', version: 2024-13-45}\n",
                           "s.yaml", {})
    assert stack.environments["e"].version == "2024-13-45"

"""The rules of infra_cli/validate/rules/resources.py (names, outputs, import blocks, tags, pasted names), each on
a minimal stack that breaks it: rule id, severity, position, hint. Each test fails if its rule is removed."""

from __future__ import annotations

import pytest

from rules_fixtures import A100, CURATED_ENV, HEADER, check, one_distribution


def test_cluster_name_must_suit_azure(tmp_path):
    r = check(tmp_path, f"clusters:\n  9gpu:\n    size: {A100}\n")
    r.one("cluster.name", "error", "9gpu")


@pytest.mark.parametrize("name", ["ab", "a" * 25, "gpu-", "gpu_a"])
def test_cluster_name_length_and_characters(tmp_path, name):
    r = check(tmp_path, f"clusters:\n  {name}:\n    size: {A100}\n")
    assert r.of("cluster.name")


def test_environment_name_must_suit_azure(tmp_path):
    r = check(tmp_path, f"environments:\n  '-env':\n    {CURATED_ENV}\n")
    r.one("environment.name", "error", "'-env'")


def test_distribution_name_must_suit_a_job(tmp_path):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n")
    r = check(tmp_path, body.replace("  job:", "  'my job':"))
    r.one("distribution.name", "error", "'my job'")


def test_an_environment_variable_name_a_job_cannot_hold(tmp_path):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                            "environment_variables: {'A=B': '1'}\n")
    r = check(tmp_path, body)
    r.one("distribution.environment-variable-name", "error", "'A=B'")


OUTPUT_STACK = f"clusters:\n  gpu:\n    size: {A100}\n"


@pytest.mark.parametrize("value, rule", [
    ("plain text", "output.no-reference"),
    ("${cluster.gpu}", "output.reference"),
    ("${cluster.cpu.id}", "output.unknown-address"),
    ("${cluster.gpu.colour}", "output.unknown-attribute"),
])
def test_an_output_refers_to_an_attribute_of_a_declared_resource(tmp_path, value, rule):
    r = check(tmp_path, OUTPUT_STACK + f"outputs:\n  o:\n    value: '{value}'\n")
    r.one(rule, "error", f"value: '{value}'")


def test_an_output_of_a_sensitive_value_says_so(tmp_path):
    body = "variables:\n  t: {sensitive: true, default: s3cret}\n" + OUTPUT_STACK
    r = check(tmp_path, body + "outputs:\n  o:\n    value: '${cluster.gpu.id}/${var.t}'\n")
    assert "s3cret" not in r.one("output.sensitive", "error", "value: '${cluster.gpu.id}").message
    said = check(tmp_path, body + "outputs:\n  o:\n    value: '${cluster.gpu.id}/${var.t}'\n    sensitive: true\n")
    # the default written in the file is its own warning (tests/test_sensitive_default.py), and nothing else is said
    assert [d.rule for d in said.diagnostics] == ["variable.sensitive-default"]


@pytest.mark.parametrize("blocks, rule, at", [
    ("[{to: cluster.gpu, id: other}]", "import.name-mismatch", "id: other"),
    ("[{to: cluster.gpu, id: gpu}, {to: cluster.gpu, id: gpu}]", "import.duplicate", "to: cluster.gpu"),
    ("[{to: environment.env, id: env}]", "import.curated", "to: environment.env"),
    ("[{to: cluster.cpu, id: cpu}]", "import.undeclared", "to: cluster.cpu"),
    ("[{to: cluster.gpu, id: '../x'}]", "address.invalid", "id: '../x'"),
])
def test_import_blocks(tmp_path, blocks, rule, at):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n")
    r = check(tmp_path, body + f"import: {blocks}\n")
    r.one(rule, "error", at, nth=2 if rule == "import.duplicate" else 1)


@pytest.mark.parametrize("tags, rule, at", [
    ({f"t{i}": "v" for i in range(46)}, "tags.count", "tags:"),
    ({"a<b": "v"}, "tags.name", "a<b"),
    ({"infra.stack": "mine"}, "tags.reserved", "infra.stack"),
    ({"t": "v" * 257}, "tags.value", "t: vvv"),
])
def test_tags_within_azures_limits(tmp_path, tags, rule, at):
    written = "".join(f"      '{k}': {v}\n" for k, v in tags.items())
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    tags:\n{written}")
    assert [d.severity for d in r.of(rule)] == ["error"] and r.of(rule)[0].hint, r.diagnostics



@pytest.mark.parametrize("written, rule", [
    ("resource_group: 'rg.'", "workspace.resource-group-name"),
    ("name: ab", "workspace.name"),
])
def test_workspace_names_must_suit_azure(tmp_path, written, rule):
    header = HEADER.replace(f"{written.split(':')[0]}: {'rg' if 'group' in written else 'mlw'},", written + ",")
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n", header=header)
    r.one(rule, "error", written)

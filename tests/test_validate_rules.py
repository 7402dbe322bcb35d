"""Each rule in infra_cli/validate/rules.py, on a minimal stack that breaks it: rule id, severity, position, hint.

Every test fails if its rule is removed (the rule id would be missing). Stacks are written to a temporary
file and go through the real loader, so positions are the ones a user sees.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from infra_cli.diagnostics import Diagnostic
from infra_cli.stack.load import load_stack
from infra_cli.validate.engine import validate_files, validate_stack
from infra_cli.validate.rules import RULES

ROOT = Path(__file__).resolve().parent.parent
HEADER = """\
stack: t
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: ws, location: eastus}
"""
A100 = "Standard_ND96asr_v4"
CURATED = "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"


class Checked:
    def __init__(self, text: str, diagnostics: list[Diagnostic], file: str):
        self.text, self.diagnostics, self.file = text, diagnostics, file

    def of(self, rule: str) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.rule == rule]

    def one(self, rule: str, severity: str, at: str, nth: int = 1) -> Diagnostic:
        """The single diagnostic of `rule`; checks its severity, hint, and that it points at `at` (a text snippet)."""
        found = self.of(rule)
        assert len(found) == 1, (rule, self.diagnostics)
        d = found[0]
        assert d.severity == severity, d
        assert d.hint, d
        assert d.file == self.file
        assert (d.line, d.column) == self.position(at, nth), (d, at)
        return d

    def position(self, snippet: str, nth: int = 1) -> tuple[int, int]:
        """Where `snippet` starts; for `key: value` where the value starts (rules point at values)."""
        start = -1
        for _ in range(nth):
            start = self.text.index(snippet, start + 1)
        if ": " in snippet:
            start += snippet.index(": ") + 2
        before = self.text[:start]
        return before.count("\n") + 1, start - (before.rfind("\n") + 1) + 1


def check(tmp_path: Path, body: str) -> Checked:
    text = HEADER + textwrap.dedent(body)
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    return Checked(text, validate_stack(load_stack(path)), str(path))


def one_distribution(size: str, env: str, dist: str, cluster_extra: str = "", max_instances: int = 4) -> str:
    """A stack with one cluster `gpu`, one environment `env` (YAML lines) and one distribution `job`."""
    indent = lambda block, n: textwrap.indent(textwrap.dedent(block).strip("\n"), " " * n)  # noqa: E731
    return (f"clusters:\n  gpu:\n    size: {size}\n    max_instances: {max_instances}\n"
            + (indent(cluster_extra, 4) + "\n" if cluster_extra else "")
            + "environments:\n  env:\n" + indent(env, 4) + "\n"
            + "distributions:\n  job:\n    cluster: gpu\n    environment: env\n" + indent(dist, 4) + "\n")


CURATED_ENV = f"curated: {CURATED}"


# ---- the examples ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("stack", sorted((ROOT / "stacks").glob("*.yaml")), ids=lambda p: p.name)
def test_example_stacks_have_no_diagnostics(stack):
    assert validate_files([stack]) == []


def test_every_rule_is_exercised_by_this_file():
    source = Path(__file__).read_text(encoding="utf-8")
    rules_source = (ROOT / "infra_cli" / "validate" / "rules.py").read_text(encoding="utf-8")
    import re

    ids = set(re.findall(r'"((?:cluster|environment|distribution)\.[a-z-]+)"', rules_source))
    assert len(RULES) >= 15 and ids
    missing = sorted(i for i in ids if f'"{i}"' not in source)
    assert not missing, f"rules without a test here: {missing}"


# ---- names ----------------------------------------------------------------------------------------------

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


# ---- clusters -------------------------------------------------------------------------------------------

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
    assert "Standard_ND96asr_v4" in d.hint and "infiniband: optional" in d.hint


@pytest.mark.parametrize("size", ["Standard_ND96asr_v4", "Standard_ND96isr_H100_v5", "Standard_NC24rs_v3",
                                  "Standard_ND40rs_v2", "standard_nd96amsr_a100_v4"])
def test_infiniband_required_on_an_eligible_size_is_clean(tmp_path, size):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {size}\n    infiniband: required\n")
    assert not r.of("cluster.infiniband-ineligible")


def test_ssh_access_without_a_user_and_key(tmp_path):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    ssh_public_access_enabled: true\n")
    r.one("cluster.ssh-settings", "error", "ssh_public_access_enabled: true")


def test_ssh_access_with_a_key_is_clean(tmp_path):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    ssh_public_access_enabled: true\n"
                        "    ssh_settings: {admin_username: azureuser, ssh_key_value: ssh-rsa AAAA}\n")
    assert not r.of("cluster.ssh-settings")


def test_ssh_password_written_in_the_stack_warns(tmp_path, monkeypatch):
    body = (f"clusters:\n  gpu:\n    size: {A100}\n    ssh_public_access_enabled: true\n"
            "    ssh_settings:\n      admin_username: azureuser\n      admin_password: {pw}\n")
    d = check(tmp_path, body.format(pw="Sup3rS3cret!x")).one("cluster.ssh-password-inline", "warning", "Sup3rS3cret!x")
    assert "Sup3rS3cret" not in d.message + d.hint and "${NODE_ADMIN_PASSWORD}" in d.hint
    monkeypatch.setenv("NODE_ADMIN_PASSWORD", "Sup3rS3cret!x")
    assert not check(tmp_path, body.format(pw="${NODE_ADMIN_PASSWORD}")).of("cluster.ssh-password-inline")
    # `$$` is an escaped dollar, not a reference: still written in the file.
    assert check(tmp_path, body.format(pw="'pa$$word'")).of("cluster.ssh-password-inline")


def test_cluster_in_another_region_warns(tmp_path):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    location: West US 2\n")
    r.one("cluster.location", "warning", "West US 2")
    same = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    location: East US\n")
    assert not same.of("cluster.location")


# ---- environments ---------------------------------------------------------------------------------------

def test_bad_requirement_spec(tmp_path):
    r = check(tmp_path, "environments:\n  env:\n    image: x/y:1\n    requires: [openmpi>=4.1, openmpy]\n")
    d = r.one("environment.requires-spec", "error", "openmpy")
    assert "openmpi" in d.message  # did you mean


def test_missing_conda_file(tmp_path):
    r = check(tmp_path, "environments:\n  env:\n    image: x/y:1\n    conda_file: nope.yml\n")
    r.one("environment.file-missing", "error", "nope.yml")
    (tmp_path / "conda.yml").write_text("name: x\n")
    ok = check(tmp_path, "environments:\n  env:\n    image: x/y:1\n    conda_file: conda.yml\n")
    assert not ok.of("environment.file-missing")


def test_missing_build_context(tmp_path):
    r = check(tmp_path, "environments:\n  env:\n    build: {path: no-such-dir}\n")
    r.one("environment.file-missing", "error", "no-such-dir")


def test_build_context_without_its_dockerfile(tmp_path):
    (tmp_path / "ctx").mkdir()
    r = check(tmp_path, "environments:\n  env:\n    build: {path: ctx}\n")
    d = r.one("environment.file-missing", "error", "ctx}")
    assert "has no Dockerfile" in d.message
    (tmp_path / "ctx" / "gpu.Dockerfile").write_text("FROM scratch\n")
    assert not check(tmp_path, "environments:\n  env:\n    build: {path: ctx, dockerfile_path: gpu.Dockerfile}\n"
                     ).of("environment.file-missing")
    # `/` has no Dockerfile either: refused before plan would hash the whole filesystem.
    assert check(tmp_path, "environments:\n  env:\n    build: {path: /}\n").of("environment.file-missing")


def test_unknown_build_template(tmp_path):
    r = check(tmp_path, "environments:\n  env:\n    build: {template: openmpi-rmda}\n")
    d = r.one("environment.template-unknown", "error", "openmpi-rmda")
    assert "openmpi-rdma" in d.hint


@pytest.mark.parametrize("parameters, message", [
    ("{pip_packages: [deepspeed], cuda: 12}", "no parameter(s) cuda"),
    ("{openmpi_source: latest}", "neither 'distro' nor a version"),
])
def test_bad_template_parameters(tmp_path, parameters, message):
    r = check(tmp_path, f"environments:\n  env:\n    build:\n      template: openmpi-rdma\n"
                        f"      parameters: {parameters}\n")
    d = r.one("environment.template-parameters", "error", f"parameters: {parameters}")
    assert message in d.message


def test_good_template_parameters_are_clean(tmp_path):
    r = check(tmp_path, "environments:\n  env:\n    build:\n      template: openmpi-rdma\n"
                        "      parameters: {openmpi_source: 4.1.6, pip_packages: [deepspeed]}\n")
    assert r.diagnostics == []


# ---- distributions --------------------------------------------------------------------------------------

def test_dangling_references(tmp_path):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n")
    body = body.replace("cluster: gpu", "cluster: gpus").replace("environment: env", "environment: nope")
    r = check(tmp_path, body)
    found = r.of("distribution.dangling-reference")
    assert [(d.line, d.column) for d in found] == [r.position("gpus"), r.position("nope")]
    assert "did you mean 'gpu'" in found[0].hint
    assert all(d.severity == "error" and d.hint for d in found)


@pytest.mark.parametrize("size", ["Standard_NC24r", "Standard_NC96ads_A100_v4", "Standard_NC80adis_H100_v5"])
def test_multinode_without_infiniband_is_an_error(tmp_path, size):
    r = check(tmp_path, one_distribution(size, CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                          "process_count_per_instance: 4\n"))
    d = r.one("distribution.multinode-without-infiniband", "error", "instance_count: 2")
    assert "infiniband: optional" in d.hint


def test_multinode_without_infiniband_is_a_warning_when_optional(tmp_path):
    r = check(tmp_path, one_distribution("Standard_NC96ads_A100_v4", CURATED_ENV,
                                         "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 4\n",
                                         cluster_extra="infiniband: optional"))
    r.one("distribution.multinode-without-infiniband", "warning", "instance_count: 2")


def test_single_node_without_infiniband_is_clean(tmp_path):
    r = check(tmp_path, one_distribution("Standard_NC96ads_A100_v4", CURATED_ENV,
                                         "type: pytorch\nprocess_count_per_instance: 4\n"))
    assert r.diagnostics == []


def test_more_processes_than_gpus(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 16\n"))
    d = r.one("distribution.gpus-exceeded", "error", "process_count_per_instance: 16")
    assert "process_count_per_instance: 8" in d.hint


def test_fewer_processes_than_gpus(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 4\n"))
    r.one("distribution.gpus-underused", "warning", "process_count_per_instance: 4")


def test_gpu_training_on_a_cpu_size(tmp_path):
    r = check(tmp_path, one_distribution("Standard_HB120rs_v3", CURATED_ENV, "type: pytorch\n"))
    r.one("distribution.no-gpus", "warning", "cluster: gpu")


def test_instance_count_above_max_instances(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 3\n"
                                                          "process_count_per_instance: 8\n", max_instances=2))
    d = r.one("distribution.instance-count", "error", "instance_count: 3")
    assert "max_instances" in d.hint


CUSTOM_IMAGE = "image: myacr.azurecr.io/train:1"


@pytest.mark.parametrize("dist", [
    "type: mpi\nprocess_count_per_instance: 8\n",
    "type: mpi\nframework: horovod\nprocess_count_per_instance: 8\n",
    "type: mpi\nframework: deepspeed\nprocess_count_per_instance: 8\n",
], ids=["mpi", "horovod", "deepspeed-under-mpi"])
def test_mpi_launch_needs_open_mpi_in_a_custom_image(tmp_path, dist):
    r = check(tmp_path, one_distribution(A100, CUSTOM_IMAGE, dist))
    d = r.one("distribution.mpi-missing", "error", "environment: env")
    assert "openmpi" in d.hint


@pytest.mark.parametrize("env", [
    CURATED_ENV,                                       # curated GPU images carry Open MPI 4.1
    CUSTOM_IMAGE + "\nrequires: [openmpi>=4.1]",       # a custom image that declares it
    CUSTOM_IMAGE + "\nrequires: [hpcx]",
    "build: {template: openmpi-rdma}",                 # our template installs it
], ids=["curated", "requires-openmpi", "requires-hpcx", "template"])
def test_mpi_launch_with_open_mpi_is_clean(tmp_path, env):
    r = check(tmp_path, one_distribution(A100, env, "type: mpi\nframework: horovod\nprocess_count_per_instance: 8\n"))
    assert r.diagnostics == []


def test_deepspeed_under_pytorch_needs_no_mpi(tmp_path):
    r = check(tmp_path, one_distribution(A100, CUSTOM_IMAGE, "type: pytorch\nframework: deepspeed\n"
                                                             "process_count_per_instance: 8\n"))
    assert not r.of("distribution.mpi-missing")


@pytest.mark.parametrize("env", [CUSTOM_IMAGE + "\nrequires: [mpi]", "curated: azureml:SomeoneElses-env@latest"],
                         ids=["any-mpi", "unknown-curated"])
def test_mpi_unverifiable_environment_warns(tmp_path, env):
    r = check(tmp_path, one_distribution(A100, env, "type: mpi\nprocess_count_per_instance: 8\n"))
    r.one("distribution.mpi-unverified", "warning", "environment: env")


def test_framework_under_the_wrong_type(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: horovod\n"
                                                          "process_count_per_instance: 8\n"))
    d = r.one("distribution.framework-type", "error", "type: pytorch")
    assert "type: mpi" in d.hint


def test_framework_with_the_wrong_launcher(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: mpi\nframework: horovod\nlauncher: per-node\n"))
    r.one("distribution.framework-launcher", "error", "launcher: per-node")


def test_per_node_launcher_with_several_processes_per_node(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: lightning\n"
                                                          "launcher: per-node\nprocess_count_per_instance: 8\n"))
    r.one("distribution.per-node-launcher", "error", "process_count_per_instance: 8")


def test_per_node_launcher_with_one_process_is_clean(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: lightning\n"
                                                          "launcher: per-node\n"))
    assert r.diagnostics == []


def test_tensorflow_counts_on_another_type(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                                                          "worker_count: 2\n"))
    r.one("distribution.tensorflow-counts", "error", "worker_count: 2")


def test_tensorflow_more_tasks_than_nodes(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: tensorflow\ninstance_count: 2\n"
                                                          "worker_count: 3\n"))
    d = r.one("distribution.tensorflow-counts", "error", "worker_count: 3")
    assert "instance_count: 3" in d.hint


def test_tensorflow_parameter_servers_outnumbering_workers(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: tensorflow\ninstance_count: 4\n"
                                                          "worker_count: 2\nparameter_server_count: 2\n"))
    r.one("distribution.tensorflow-counts", "warning", "parameter_server_count: 2")


def test_tensorflow_with_process_count_per_instance(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: tensorflow\nprocess_count_per_instance: 8\n"))
    r.one("distribution.tensorflow-counts", "error", "process_count_per_instance: 8")


def test_transformers_per_process_needs_local_rank(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: transformers\n"
                                                          "process_count_per_instance: 8\n"
                                                          "command: python run_glue.py --fp16\n"))
    d = r.one("distribution.transformers-local-rank", "error", "python run_glue.py")
    assert "--local_rank $LOCAL_RANK" in d.hint


@pytest.mark.parametrize("dist", [
    "type: pytorch\nframework: transformers\nprocess_count_per_instance: 8\n"
    "command: python run_glue.py --local_rank $LOCAL_RANK\n",
    "type: pytorch\nframework: transformers\nprocess_count_per_instance: 8\n"
    "command: python run_glue.py --local-rank=$LOCAL_RANK\n",
    "type: pytorch\nframework: transformers\nlauncher: per-node\ncommand: torchrun run_glue.py\n",
], ids=["passes-local-rank", "hyphen-spelling", "per-node"])
def test_transformers_clean(tmp_path, dist):
    assert check(tmp_path, one_distribution(A100, CURATED_ENV, dist)).diagnostics == []


def test_disabling_infiniband_on_an_infiniband_size_warns(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                          "process_count_per_instance: 8\n"
                                                          "environment_variables: {NCCL_IB_DISABLE: 1}\n"))
    r.one("distribution.infiniband-disabled", "warning", "{NCCL_IB_DISABLE")


@pytest.mark.parametrize("kind, var, severity", [
    ("type: pytorch\nprocess_count_per_instance: 8", "RANK", "error"),
    ("type: pytorch\nprocess_count_per_instance: 8", "MASTER_PORT", "warning"),
    ("type: mpi\nprocess_count_per_instance: 8", "OMPI_COMM_WORLD_SIZE", "error"),
    ("type: tensorflow\nworker_count: 2", "TF_CONFIG", "error"),
])
def test_launcher_variables_set_by_hand(tmp_path, kind, var, severity):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"{kind}\ninstance_count: 2\n"
                                                          f"environment_variables:\n  NCCL_DEBUG: WARN\n  {var}: '1'\n"))
    d = r.one("distribution.launcher-variable", severity, var)  # points at the key
    assert f"sets {var}, which Azure ML's" in d.message and f"remove {var}" in d.hint


def test_launcher_variables_of_another_type_are_yours(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                                                          "instance_count: 2\nenvironment_variables: {TF_CONFIG: x}\n"))
    assert r.of("distribution.launcher-variable") == []


def test_json_shape_of_a_rule_diagnostic(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 16\n"))
    assert list(r.diagnostics[0].to_json()) == ["severity", "rule", "message", "file", "line", "column", "hint"]


# ---- sizes outside the catalog, retirement, pasted compute YAML ------------------------------------------

def test_unknown_size_is_judged_by_its_name(tmp_path):
    # Azure's naming convention: no `r` = no RDMA, so two nodes are an error (issue 11: NC4as_T4_v3 was a warning)
    r = check(tmp_path, one_distribution("Standard_NC4as_T5_v3", CURATED_ENV, "type: pytorch\ninstance_count: 2\n"))
    assert r.of("cluster.size-unknown")[0].severity == "warning"
    d = r.one("distribution.multinode-without-infiniband", "error", "instance_count: 2")
    assert "no `r`" in d.message


def test_unknown_rdma_size_multinode_is_unverified(tmp_path):
    r = check(tmp_path, one_distribution("Standard_ND96isr_B300_v7", CURATED_ENV, "type: pytorch\ninstance_count: 2\n"))
    d = r.one("distribution.infiniband-unverified", "warning", "instance_count: 2")
    assert "SR-IOV" in d.message
    assert not r.of("distribution.multinode-without-infiniband")


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
    d = r.one("distribution.multinode-without-infiniband", "error", "instance_count: 2")
    assert "ND40rs" not in (d.hint or "").split("(")[0]
    r = check(tmp_path, "clusters:\n  gpu:\n    size: Standard_ND40rs_v3\n")
    assert "did you mean 'Standard_ND40rs_v2'" in r.one("cluster.size-unknown", "warning", "Standard_ND40rs_v3").hint


def test_retiring_size_warns(tmp_path):
    import datetime

    from infra_cli.validate.knowledge import checked_catalog
    from infra_cli.validate.rules import run_rules

    text = HEADER + "clusters:\n  viz:\n    size: Standard_NV12s_v3\n"
    path = tmp_path / "stack.yaml"
    path.write_text(text, encoding="utf-8")
    before = run_rules(load_stack(path), checked_catalog(), today=datetime.date(2026, 1, 1))
    r = Checked(text, before, str(path))
    assert "2026-09-30" in r.one("cluster.size-retiring", "warning", "Standard_NV12s_v3").message
    after = run_rules(load_stack(path), checked_catalog(), today=datetime.date(2026, 10, 1))
    assert [d.severity for d in after if d.rule == "cluster.size-retired"] == ["error"]


def test_public_ip_off_without_a_subnet(tmp_path):
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    enable_node_public_ip: false\n")
    r.one("cluster.public-ip-without-subnet", "error", "enable_node_public_ip: false")
    r = check(tmp_path, f"clusters:\n  gpu:\n    size: {A100}\n    enable_node_public_ip: false\n"
                        "    network_settings: {vnet_name: v, subnet: s}\n")
    assert not r.of("cluster.public-ip-without-subnet")


def test_pasted_compute_name_must_equal_the_key(tmp_path):
    r = check(tmp_path, f"clusters:\n  gpu:\n    name: gpu-cluster\n    size: {A100}\n")
    r.one("cluster.name-mismatch", "error", "name: gpu-cluster")
    r = check(tmp_path, f"clusters:\n  gpu:\n    name: gpu\n    size: {A100}\n")
    assert r.diagnostics == []

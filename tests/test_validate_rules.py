"""Each rule in infra_cli/validate/rules/, on a minimal stack that breaks it: rule id, severity, position, hint.

Every test fails if its rule is removed (the rule id would be missing). Stacks are written to a temporary
file and go through the real loader, so positions are the ones a user sees.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from infra_cli.diagnostics import Diagnostic
from infra_cli.knowledge.skus import load_catalog
from infra_cli.stack.load import load_stack
from infra_cli.validate.dockerfile import read_dockerfile
from infra_cli.validate.engine import validate_files, validate_stack
from infra_cli.validate.rules.registry import RULES

ROOT = Path(__file__).resolve().parent.parent
HEADER = """\
stack: t
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
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
    rules_source = "".join(p.read_text(encoding="utf-8")
                           for p in sorted((ROOT / "infra_cli" / "validate" / "rules").glob("*.py")))
    import re

    ids = set(re.findall(r'"((?:cluster|environment|distribution)\.[a-z-]+)"', rules_source))
    assert len(RULES) >= 15 and ids
    missing = sorted(i for i in ids if f'"{i}"' not in source)
    assert not missing, f"rules without a test here: {missing}"


# the order the rules run in, so the order diagnostics come out in (the modules of infra_cli/validate/rules/
# register their rules as infra_cli/validate/rules/__init__.py imports them, each in definition order)
RULE_ORDER = [
    "resource_names", "output_references", "import_blocks", "tags",
    "cluster_size", "cluster_infiniband", "cluster_ssh", "cluster_ssh_secret_inline", "cluster_location",
    "cluster_node_public_ip", "cluster_subnet_needs_vnet", "cluster_compute_name",
    "environment_name", "environment_requires", "environment_files", "code_paths", "environment_template_parameters",
    "environment_build_steps", "environment_image_reference",
    "distribution_job_bindings", "distribution_job_inputs", "distribution_job_services", "distribution_identity",
    "distribution_references", "distribution_infiniband", "distribution_gpus", "distribution_instances",
    "distribution_mpi", "distribution_packages", "distribution_framework",
    "distribution_command_syntax", "distribution_head_node_launcher", "distribution_launcher",
    "distribution_launcher_declared", "distribution_launcher_gpus", "distribution_launcher_nodes",
    "distribution_launcher_rendezvous", "distribution_node_rank_variable", "distribution_lightning",
    "distribution_tensorflow", "distribution_transformers_local_rank", "distribution_ib_disabled",
    "distribution_launcher_variables",
]


def test_rules_run_in_their_order():
    """A new rule goes into this list where it runs; moving rules between modules keeps the order."""
    assert [fn.__name__ for fn in RULES] == RULE_ORDER


# ---- a command job's keys (validators/job_schema.yaml) -----------------------------------------------------

def test_a_command_binding_names_a_declared_input(tmp_path):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 8\n"
                            "inputs: {epochs: 1}\noutputs: {model: {type: uri_folder}}\n"
                            "command: python train.py --epochs ${{inputs.epoch}} --out ${{outputs.model}}\n")
    d = check(tmp_path, body).one("distribution.job-binding", "error", "command: python")
    assert "${{inputs.epochs}}" in d.hint and "epoch" in d.message
    assert check(tmp_path, body.replace("inputs.epoch}}", "inputs.epochs}}")).of("distribution.job-binding") == []


def test_a_components_input_declaration_in_a_job_is_refused_as_load_job_refuses_it(tmp_path):
    """tests/test_sdk_shapes.py holds every input shape to azure-ai-ml's load_job verdict."""
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 8\n"
                            "inputs: {epochs: {type: integer}}\ncommand: python train.py --epochs ${{inputs.epochs}}\n")
    d = check(tmp_path, body).one("distribution.job-input", "error", "type: integer")
    assert "epochs: VALUE" in d.hint and "uri_folder" in d.hint
    assert check(tmp_path, body.replace("{type: integer}", "10")).of("distribution.job-input") == []


def test_a_service_key_azure_ai_ml_does_not_read(tmp_path):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 8\n"
                            "services:\n  vscode:\n    job_service_type: vs_code\n    nodes: all\n")
    d = check(tmp_path, body).one("distribution.job-key", "error", "job_service_type")
    assert "'type'" in d.hint
    assert check(tmp_path, body.replace("job_service_type", "type")).of("distribution.job-key") == []


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


@pytest.mark.parametrize("conda, words", [
    # aliases that expand past the stack loader's bounds (stack/source.py), in a file of a few KiB
    ("name: x\na0: &a0 [" + ", ".join(["numpy"] * 10) + "]\n"
     + "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 8))
     + "dependencies: [*a7]\n", "more than 100000 values"),
    ("name: x\ns: &s " + "a" * 20000 + "\ndependencies: [" + ", ".join(["*s"] * 300) + "]\n", "MiB of text"),
    ("name: x\ndependencies: [python=3.10\n", "YAML syntax error"),
])
def test_a_conda_file_is_read_within_the_stack_loaders_bounds(tmp_path, conda, words):
    (tmp_path / "conda.yml").write_text(conda)
    r = check(tmp_path, "environments:\n  env:\n    image: x/y:1\n    conda_file: conda.yml\n")
    d = r.one("environment.conda-file", "error", "conda.yml")
    assert words in d.message and str(tmp_path / "conda.yml") in d.message
    (tmp_path / "conda.yml").write_text("name: x\ndependencies: [python=3.10, {pip: [torch]}]\nv: ${NOT_SET}\n")
    assert check(tmp_path, "environments:\n  env:\n    image: x/y:1\n    conda_file: conda.yml\n").diagnostics == []


@pytest.mark.parametrize("identity, ok", [
    ("{type: user_identity}", True), ("{type: UserIdentity}", True), ("{type: managed, client_id: x}", True),
    ("{type: AMLToken}", True), ("{type: \"managed\\n\"}", False), ("{type: userid}", False), ("{client_id: x}", False),
])
def test_a_job_identity_type_azure_ml_reads(tmp_path, identity, ok):
    body = one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 8\n"
                            f"identity: {identity}\n")
    r = check(tmp_path, body)
    if ok:
        assert r.of("distribution.identity-type") == []
    else:
        r.one("distribution.identity-type", "error", "identity: " if "type" not in identity else "{type: ")


def test_missing_build_context(tmp_path):
    r = check(tmp_path, "environments:\n  env:\n    build: {path: no-such-dir}\n")
    r.one("environment.file-missing", "error", "no-such-dir")


def test_a_build_context_step_needing_what_nothing_provides(tmp_path):
    """tests/test_build_steps.py holds the check itself; here: validate reports it at the Dockerfile's line."""
    (tmp_path / "ctx").mkdir()
    dockerfile = tmp_path / "ctx" / "Dockerfile"
    dockerfile.write_text("FROM nvcr.io/nvidia/cuda:12.4.1-devel-ubuntu22.04\nRUN pip install torch\n")
    [d] = check(tmp_path, "environments:\n  env:\n    build: {path: ctx}\n").of("environment.build-step")
    assert (d.severity, d.file, d.line, d.column) == ("error", str(dockerfile), 2, 1) and "python3-pip" in d.hint
    dockerfile.write_text("FROM nvcr.io/nvidia/cuda:12.4.1-devel-ubuntu22.04\n"
                          "RUN apt-get update && apt-get install -y python3-pip && pip install torch\n")
    assert check(tmp_path, "environments:\n  env:\n    build: {path: ctx}\n").of("environment.build-step") == []


def test_build_context_without_its_dockerfile(tmp_path):
    (tmp_path / "ctx").mkdir()
    r = check(tmp_path, "environments:\n  env:\n    build: {path: ctx}\n")
    d = r.one("environment.file-missing", "error", "ctx}")
    assert "has no Dockerfile" in d.message
    (tmp_path / "ctx" / "gpu.Dockerfile").write_text("FROM scratch\n")
    assert not check(tmp_path, "environments:\n  env:\n    build: {path: ctx, dockerfile_path: gpu.Dockerfile}\n"
                     ).of("environment.file-missing")
    # `/` is outside the stack's project: refused before plan would hash the whole filesystem.
    assert check(tmp_path, "environments:\n  env:\n    build: {path: /}\n").of("paths.outside-project")


def test_unknown_build_template(tmp_path):
    r = check(tmp_path, "environments:\n  env:\n    build: {template: openmpi-rmda}\n")
    d = r.one("environment.template-unknown", "error", "openmpi-rmda")
    assert "openmpi-rdma" in d.hint


@pytest.mark.parametrize("name", ["../../x", "/tmp/x", "OpenMPI", "openmpi-rdma/", "-x"])
def test_build_template_is_a_name_not_a_path(tmp_path, name):
    """A path would load a Dockerfile.j2 (and its `provides:`) from anywhere: refused at the value, not looked up."""
    r = check(tmp_path, f"environments:\n  env:\n    build: {{template: '{name}'}}\n")
    d = r.one("environment.template-name", "error", f"'{name}'")
    assert "not a template name" in d.message and "not a path" in d.hint
    assert not r.of("environment.template-unknown")


@pytest.mark.parametrize("parameters, message, at", [
    ("{pip_packages: [deepspeed], cuda: 12}", "no parameter(s) cuda", "parameters: {"),   # at the mapping
    ("{openmpi_source: latest}", "neither 'distro' nor a version", "openmpi_source: latest"),   # at the value
])
def test_bad_template_parameters(tmp_path, parameters, message, at):
    r = check(tmp_path, f"environments:\n  env:\n    build:\n      template: openmpi-rdma\n"
                        f"      parameters: {parameters}\n")
    d = r.one("environment.template-parameters", "error", at)
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


@pytest.mark.parametrize("size", ["Standard_NC96ads_A100_v4", "Standard_NC80adis_H100_v5"])
def test_multinode_gpus_without_infiniband_is_a_warning_naming_the_transport(tmp_path, size):
    """Issue 32: Azure runs it, slower. The warning names TCP sockets, the bandwidth against the InfiniBand
    sizes' (validators/skus.yaml) and the fix; `infiniband: required` makes it an error."""
    body = one_distribution(size, CURATED_ENV, "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 2\n")
    d = check(tmp_path, body).one("distribution.multinode-without-infiniband", "warning", "instance_count: 2")
    assert "TCP sockets" in d.message and "100-3,200 Gb/s of InfiniBand" in d.message
    assert "InfiniBand size (" in d.hint and "validators/skus.yaml" in d.hint
    required = check(tmp_path, one_distribution(size, CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                 "process_count_per_instance: 2\n", "infiniband: required"))
    d = required.one("distribution.multinode-without-infiniband", "error", "instance_count: 2")
    assert "infiniband: optional" in d.hint


def test_multinode_names_the_ethernet_bandwidth_the_catalog_has(tmp_path):
    # the NC A100 v4 page: 4 NICs / 40,000 Mbps for Standard_NC48ads_A100_v4
    r = check(tmp_path, one_distribution("Standard_NC48ads_A100_v4", CURATED_ENV,
                                         "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 2\n"))
    d = r.one("distribution.multinode-without-infiniband", "warning", "instance_count: 2")
    assert "40 Gb/s per VM" in d.message and "sizes/gpu-accelerated/nca100v4-series" in d.hint   # with its source
    r = check(tmp_path, one_distribution("Standard_NC24s_v3", CURATED_ENV,
                                         "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 4\n"))
    assert "its bandwidth not in the catalog" in r.one("distribution.multinode-without-infiniband", "warning",
                                                   "instance_count: 2").message


def test_rdma_without_sriov_multinode_is_an_error(tmp_path):
    """The newest guide (how-to-train-distributed-gpu, 2026-01-14): NC24r has RDMA but no SR-IOV, so NCCL and MPI
    cannot use its fabric: an error even without `infiniband: required`."""
    r = check(tmp_path, one_distribution("Standard_NC24r", CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                                      "process_count_per_instance: 4\n"))
    assert "no SR-IOV" in r.one("distribution.multinode-without-infiniband", "error", "instance_count: 2").message


@pytest.mark.parametrize("size, dist", [("Standard_DS3_v2", "type: pytorch"), ("Standard_DS3_v2", "type: mpi"),
                                        ("Standard_F16s_v2", "type: mpi"), ("Standard_DS15_v2", "type: mpi"),
                                        ("Standard_D9z_v9", "type: mpi")])
def test_multinode_on_cpu_sizes_gets_no_infiniband_finding(tmp_path, size, dist):
    """Issue 32: gloo and MPI over TCP are how CPU jobs run across nodes (azure-ai-ml's dist_job_1/2 on Azure ML's
    default Standard_DS3_v2); a CPU size outside the catalog is judged by its family letters."""
    r = check(tmp_path, one_distribution(size, CURATED_ENV, f"{dist}\ninstance_count: 2\n"))
    assert not r.of("distribution.multinode-without-infiniband")
    r = check(tmp_path, one_distribution(size, CURATED_ENV, f"{dist}\ninstance_count: 2\n", "infiniband: required"))
    hint = r.one("distribution.multinode-without-infiniband", "error", "instance_count: 2").hint
    # a CPU size is pointed at the HPC InfiniBand sizes (HB, HC, HX), with all their cores
    assert "Standard_HB120rs_v3" in hint and "Standard_ND" not in hint and "-" not in hint.split("(")[1]


def test_multinode_without_infiniband_is_a_warning_when_optional(tmp_path):
    r = check(tmp_path, one_distribution("Standard_NC96ads_A100_v4", CURATED_ENV,
                                         "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 4\n",
                                         cluster_extra="infiniband: optional"))
    r.one("distribution.multinode-without-infiniband", "warning", "instance_count: 2")


def test_single_node_without_infiniband_is_clean(tmp_path):
    r = check(tmp_path, one_distribution("Standard_NC96ads_A100_v4", CURATED_ENV,
                                         "type: pytorch\nprocess_count_per_instance: 4\n"))
    assert r.diagnostics == []


@pytest.mark.parametrize("processes", [9, 16])  # 9: one more than the 8 GPUs, the boundary itself
def test_more_processes_than_gpus(tmp_path, processes):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\nprocess_count_per_instance: {processes}\n"))
    d = r.one("distribution.gpus-exceeded", "error", f"process_count_per_instance: {processes}")
    assert "process_count_per_instance: 8" in d.hint


def test_exactly_one_process_per_gpu_is_clean(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"))
    assert [d.rule for d in r.diagnostics if d.rule.startswith("distribution.gpus")] == []


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
    # the template as a stack writes it (clean: test_mpi_launch_with_open_mpi_is_clean), not a path of this
    # repository that an installed infra does not have
    assert "`build: {template: openmpi-rdma}`" in d.hint and "templates/docker" not in d.hint, d.hint


@pytest.mark.parametrize("env", [
    CURATED_ENV,                                       # curated GPU images carry Open MPI 4.1
    CUSTOM_IMAGE + "\nrequires: [openmpi>=4.1]",       # a custom image that declares it
    CUSTOM_IMAGE + "\nrequires: [hpcx]",
    "build: {template: openmpi-rdma}",                 # our template installs it
], ids=["curated", "requires-openmpi", "requires-hpcx", "template"])
def test_mpi_launch_with_open_mpi_is_clean(tmp_path, env):
    r = check(tmp_path, one_distribution(A100, env, "type: mpi\nprocess_count_per_instance: 8\n"))
    assert r.diagnostics == []


def test_deepspeed_under_pytorch_needs_no_mpi(tmp_path):
    r = check(tmp_path, one_distribution(A100, CUSTOM_IMAGE, "type: pytorch\nframework: deepspeed\n"
                                                             "process_count_per_instance: 8\n"))
    assert not r.of("distribution.mpi-missing")


@pytest.mark.parametrize("env", ["curated: azureml:SomeoneElses-env@latest"], ids=["unknown-curated"])
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
    "type: pytorch\nframework: transformers\nlauncher: per-node\ncommand: torchrun --nproc_per_node 8 run_glue.py\n",
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
    # Azure's naming convention: no `r` = no RDMA, so two nodes of a GPU family (N*) go over TCP sockets: a warning
    r = check(tmp_path, one_distribution("Standard_NC4as_T5_v3", CURATED_ENV, "type: pytorch\ninstance_count: 2\n"))
    assert r.of("cluster.size-unknown")[0].severity == "warning"
    d = r.one("distribution.multinode-without-infiniband", "warning", "instance_count: 2")
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
    r = Checked(text, before, str(path))
    assert "2026-09-30" in r.one("cluster.size-retiring", "warning", "Standard_NV12s_v3").message
    after = run_rules(load_stack(path), load_catalog(), today=datetime.date(2026, 10, 1))
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


def test_pasted_environment_name_must_equal_the_key(tmp_path):
    """An `az ml environment` YAML pastes with its $schema and name (azure-ai-ml's own test files do)."""
    schema = "$schema: https://azuremlschemas.azureedge.net/latest/environment.schema.json\n    "
    r = check(tmp_path, f"environments:\n  env:\n    {schema}name: myTestEnv\n    image: x.azurecr.io/t:1\n")
    r.one("environment.name-mismatch", "error", "name: myTestEnv")
    r = check(tmp_path, f"environments:\n  myTestEnv:\n    {schema}name: myTestEnv\n    image: x.azurecr.io/t:1\n")
    assert r.diagnostics == []


# ---- the command: launchers read from it (infra_cli/stack/launch.py, validators/launchers.yaml) -----------

def test_command_parser_finds_the_training_step():
    from infra_cli.knowledge.launchers import launchers
    from infra_cli.stack.launch import count, parse_command, parse_steps, variables

    table = launchers()
    step = parse_command("cd src && NCCL_DEBUG=INFO OMP_NUM_THREADS=1 python -m torch.distributed.run "
                         "--nproc_per_node=8 --nnodes ${{inputs.nodes}} --node_rank \"$NODE_RANK\" "
                         "--master_addr $MASTER_ADDR --master_port $MASTER_PORT train.py --epochs 3 > log 2>&1", table)
    assert (step.kind, step.launcher.name, step.invoked_as) == ("per-node", "torchrun", "python -m torch.distributed.run")
    assert count(step.role("processes_per_node")) == 8 and count(step.role("nodes")) is None  # a placeholder
    assert variables(step.role("node_rank")) == {"NODE_RANK"} and variables("${{inputs.x}}") == set()
    assert (step.script, step.script_args) == ("train.py", ("--epochs", "3"))
    inner = parse_command("bash -c 'pip install -r req.txt; exec torchrun --nproc-per-node 4 t.py'", table)
    assert (inner.launcher.name, inner.role("processes_per_node")) == ("torchrun", "4")
    assert parse_command("mpirun -np 16 --hostfile h python train.py", table).kind == "head-node"
    assert parse_command("accelerate launch --multi_gpu --num_processes 16 t.py", table).role("processes_total") == "16"
    assert parse_command("deepspeed --hostfile hosts train.py", table).kind == "head-node"  # it ssh-es into the hosts
    assert parse_command("deepspeed --hostfile hosts --no_ssh train.py", table).kind == "per-node"
    assert [s.script for s in parse_steps("python prep.py\npython train.py --lr 1", table)] == ["prep.py", "train.py"]
    assert parse_command("python train.py --epochs ${{inputs.epochs}}", table).kind == "script"


def test_a_launcher_in_the_command_decides_the_launcher(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\n"
                                                          "command: torchrun --nproc_per_node 8 train.py\n"))
    assert r.diagnostics == []
    assert load_stack(tmp_path / "stack.yaml").stack.distributions["job"].launcher == "per-node"


@pytest.mark.parametrize("command, needle", [
    ("mpirun -np 16 python train.py", "16 x 16 = 256 processes"),
    ("cd src && mpiexec -n 16 python train.py", "16 x 16 = 256 processes"),
    ("horovodrun -np 16 -H localhost:8 python train.py", "16 x 16 = 256 processes"),
    ("srun python train.py", "16 copies of srun"),
])
def test_head_node_launcher_in_an_azure_ml_job(tmp_path, command, needle):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: mpi\ninstance_count: 2\n"
                                                          f"process_count_per_instance: 8\ncommand: {command}\n"))
    d = r.one("distribution.head-node-launcher", "error", f"command: {command}")
    assert needle in d.message and "python train.py" in d.hint


def test_deepspeed_with_a_hostfile_starts_every_host_itself(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 2\n"
                                                          "command: deepspeed --hostfile /job/hostfile train.py\n"))
    d = r.one("distribution.head-node-launcher", "error", "command: deepspeed")
    assert "--no_ssh" in d.hint


def test_per_node_launcher_from_the_command_with_several_processes(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 4\n"
                                                          "command: deepspeed --num_gpus 8 train.py\n"))
    d = r.one("distribution.per-node-launcher", "error", "command: deepspeed")
    assert "4 x 8 = 32 processes per node" in d.message


@pytest.mark.parametrize("command, rule, severity, needle", [
    ("python -m torch.distributed.launch --nproc_per_node 8 train.py", "distribution.gpus-exceeded", "error",
     "--nproc_per_node 8 starts 8"),
    ("torchrun --nproc_per_node 2 train.py", "distribution.gpus-underused", "warning", "2 of the 4 GPUs"),
    ("torchrun train.py", "distribution.gpus-underused", "warning", "default 1"),
    ("deepspeed --num_gpus=6 train.py", "distribution.gpus-exceeded", "error", "has 4 GPU(s)"),
    ("accelerate launch --num_processes 8 --num_machines 1 train.py", "distribution.gpus-exceeded", "error",
     "--num_processes 8 over 1 node(s)"),
])
def test_per_node_processes_against_the_gpus(tmp_path, command, rule, severity, needle):
    r = check(tmp_path, one_distribution("Standard_NC24rs_v3", CURATED_ENV, f"type: pytorch\ncommand: {command}\n"))
    d = r.one(rule, severity, f"command: {command}")
    assert needle in d.message


def test_a_total_process_count_is_hinted_as_a_total(tmp_path):
    """accelerate's --num_processes counts every machine's processes: on 2 nodes of 8 GPUs the fix is 16 (the hint
    said 8, the value already there, since it told per-node from total by the flag's spelling)."""
    command = ("accelerate launch --multi_gpu --num_processes 8 --num_machines 2 --machine_rank $NODE_RANK "
               "--main_process_ip $MASTER_ADDR --main_process_port $MASTER_PORT train.py")
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: 2\ncommand: {command}\n"))
    d = r.one("distribution.gpus-underused", "warning", "command: accelerate")
    assert "4 of the 8 GPUs" in d.message and d.hint.startswith("pass --num_processes 16 "), d.hint
    over = command.replace("--num_processes 8", "--num_processes 32")
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: 2\ncommand: {over}\n"))
    assert r.one("distribution.gpus-exceeded", "error", "command: accelerate").hint.startswith("pass --num_processes 16 ")


RENDEZVOUS = "--node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT"


@pytest.mark.parametrize("command, needle", [
    (f"torchrun --nnodes 3 --nproc_per_node 8 {RENDEZVOUS} train.py", "waits for nodes that never come"),
    (f"torchrun --nnodes 1 --nproc_per_node 8 {RENDEZVOUS} train.py", "surplus nodes"),
    (f"torchrun --nproc_per_node 8 {RENDEZVOUS} train.py", "without --nnodes assumes 1 node"),
])
def test_launcher_nodes_differ_from_instance_count(tmp_path, command, needle):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: 2\ncommand: {command}\n"))
    d = r.one("distribution.launcher-nodes", "error", "command: torchrun")
    assert needle in d.message and "2" in d.hint


@pytest.mark.parametrize("kind, command, needle", [
    ("pytorch", "torchrun --nnodes 2 --nproc_per_node 8 train.py", "without --node_rank, --master_addr, --master_port"),
    ("pytorch", "torchrun --nnodes 2 --nproc_per_node 8 --node_rank 0 --master_addr $MASTER_ADDR "
                "--master_port $MASTER_PORT train.py", "the same rank"),
    ("pytorch", f"deepspeed --num_nodes 2 --num_gpus 8 {RENDEZVOUS} train.py", "needs --no_ssh"),
    ("mpi", f"torchrun --nnodes 2 --nproc_per_node 8 {RENDEZVOUS} train.py", "$NODE_RANK, which Azure ML does not set"),
])
def test_multinode_per_node_launch_needs_the_rendezvous(tmp_path, kind, command, needle):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: {kind}\ninstance_count: 2\ncommand: {command}\n"))
    d = [d for d in r.of("distribution.launcher-rendezvous") if needle in d.message]
    assert len(d) == 1, r.diagnostics
    assert d[0].severity == "error" and d[0].hint and (d[0].line, d[0].column) == r.position("command: ")


@pytest.mark.parametrize("kind, command", [
    ("pytorch", f"python -m torch.distributed.launch --nproc_per_node 8 --nnodes 2 {RENDEZVOUS} --use_env train.py"),
    ("pytorch", "torchrun --nnodes 1:4 --nproc_per_node gpu --rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:$MASTER_PORT t.py"),
    ("pytorch", f"deepspeed --hostfile h --no_ssh --num_nodes 2 --num_gpus 8 {RENDEZVOUS} train.py"),
    ("mpi", "torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint $AZ_BATCH_MASTER_NODE t.py"),
], ids=["guide-launch", "elastic", "deepspeed-no-ssh", "mpi-per-node"])
def test_multinode_per_node_launch_done_right_is_clean(tmp_path, kind, command):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: {kind}\ninstance_count: 2\ncommand: {command}\n"))
    assert r.diagnostics == []


def test_declared_launcher_that_disagrees_with_the_command(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nlauncher: per-process\n"
                                                          "command: torchrun --nproc_per_node 8 train.py\n"))
    r.one("distribution.launcher-mismatch", "error", "command: ")


def test_a_mismatched_launcher_is_said_once_not_judged_as_per_process_too(tmp_path):
    """Transformers under torchrun declared per-process: the mismatch is the one mistake; torchrun passes the
    local rank itself, so no --local_rank error is piled on."""
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: transformers\n"
                                                          "launcher: per-process\n"
                                                          "command: torchrun --nproc_per_node 8 run_glue.py\n"))
    assert [d.rule for d in r.diagnostics] == ["distribution.launcher-mismatch"], r.diagnostics


def test_a_script_that_launches_per_node_itself_may_declare_it(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: mpi\nlauncher: per-node\ninstance_count: 2\n"
                                                          "command: python launch_node.py\n"))
    assert r.diagnostics == []


def test_framework_launched_per_node_by_its_command(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: mpi\nframework: horovod\n"
                                                          "command: torchrun --nproc_per_node 8 train.py\n"))
    d = r.one("distribution.framework-launcher", "error", "command: torchrun")
    assert "per node" in d.message and "process_count_per_instance" in d.hint


def test_command_that_is_not_shell(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                                                          "command: python train.py --name \"x\n"))
    d = r.one("distribution.command-syntax", "error", "command: ")
    assert "quotation" in d.message


@pytest.mark.parametrize("dist, rule, severity, needle", [
    ("command: python train.py --trainer.num_nodes 3 --trainer.devices 8", "distribution.lightning-trainer", "error",
     "--trainer.num_nodes 3"),
    ("command: python train.py --trainer.num_nodes 2 --trainer.devices 16", "distribution.gpus-exceeded", "error",
     "--trainer.devices 16"),
    ("command: python train.py --num_nodes 2 --gpus 2", "distribution.gpus-underused", "warning", "--gpus 2"),
    ("process_count_per_instance: 8\nlauncher: per-process\ncommand: python train.py --trainer.devices 4",
     "distribution.lightning-trainer", "error", "Azure ML starts 8 processes"),
])
def test_lightning_trainer_flags(tmp_path, dist, rule, severity, needle):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\nframework: lightning\ninstance_count: 2\n"
                                                          f"{dist}\n"))
    d = r.one(rule, severity, "command: python")
    assert needle in d.message


def test_lightning_trainer_read_from_the_script_in_code(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text("import lightning as L\n\ntrainer = L.Trainer(\n"
                                               "    num_nodes=4, devices=8)\n", encoding="utf-8")
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: lightning\ninstance_count: 2\n"
                                                          "command: python train.py\ncode: ./src\n"))
    d = r.one("distribution.lightning-trainer", "error", "command: python")
    assert "src/train.py:4" in d.message


@pytest.mark.parametrize("command", [
    "cd src && python run_glue.py --local_rank=$LOCAL_RANK --fp16",
    "bash -c \"python run_glue.py --local-rank $LOCAL_RANK\"",
])
def test_transformers_local_rank_read_through_the_parser(tmp_path, command):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: transformers\n"
                                                          f"process_count_per_instance: 8\ncommand: {command}\n"))
    assert r.diagnostics == []


def test_transformers_local_rank_in_another_program_does_not_count(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nframework: transformers\n"
                                                          "process_count_per_instance: 8\n"
                                                          "command: echo --local_rank && python run_glue.py\n"))
    r.one("distribution.transformers-local-rank", "error", "command: echo")


# ---- TensorFlow as Azure ML places its tasks -----------------------------------------------------------------

@pytest.mark.parametrize("nodes, workers, ps", [(2, 2, 1), (4, 4, 1), (2, 2, 0)])
def test_tensorflow_parameter_servers_share_nodes_with_workers(tmp_path, nodes, workers, ps):
    r = check(tmp_path, one_distribution(A100, "curated: azureml:AzureML-tensorflow-2.12-cuda11@latest",
                                         f"type: tensorflow\ninstance_count: {nodes}\nworker_count: {workers}\n"
                                         f"parameter_server_count: {ps}\n"))
    assert r.diagnostics == []


def test_tensorflow_fewer_workers_than_nodes_warns(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: tensorflow\ninstance_count: 4\nworker_count: 2\n"))
    d = r.one("distribution.tensorflow-idle-nodes", "warning", "worker_count: 2")
    assert "2 node(s) run no task" in d.message


# ---- images as data ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("env", [
    "image: mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04:latest",
    "image: mcr.microsoft.com/azureml/openmpi5.0-cuda12.2-ubuntu22.04:20240601.v1",
    "image: mcr.microsoft.com/azureml/curated/acpt-pytorch-2.2-cuda12.1:19",
    "curated: azureml://registries/azureml/environments/acpt-pytorch-2.2-cuda12.1/versions/19",
    "curated: azureml://registries/azureml/environments/pytorch-2.0-cuda11.7/versions/1",
    CUSTOM_IMAGE + "\nrequires: [mpi]",                # Intel MPI or MPICH: the guide allows another MPI
    "image: mcr.microsoft.com/azureml/intelmpi2018.3-ubuntu16.04:latest",
], ids=["openmpi4-base", "openmpi5-base", "curated-image", "registry-acpt", "registry-pytorch", "any-mpi", "intelmpi"])
def test_mpi_on_azureml_images_and_any_mpi_is_clean(tmp_path, env):
    r = check(tmp_path, one_distribution(A100, env, "type: mpi\nprocess_count_per_instance: 8\n"))
    assert r.diagnostics == []


def test_registry_names_mean_nothing_in_a_workspace(tmp_path):
    r = check(tmp_path, one_distribution(A100, "curated: azureml:pytorch-2.0-cuda11.7@latest",
                                         "type: mpi\nprocess_count_per_instance: 8\n"))
    r.one("distribution.mpi-unverified", "warning", "environment: env")


@pytest.mark.parametrize("env, framework, needle", [
    (CUSTOM_IMAGE + "\nrequires: [openmpi>=4.1]", "deepspeed", "carry deepspeed, mpi4py"),
    (CUSTOM_IMAGE + "\nrequires: [openmpi>=4.1, deepspeed]", "deepspeed", "carry mpi4py"),
    ("build: {template: openmpi-rdma}", "horovod", "carry horovod"),
], ids=["deepspeed", "deepspeed-without-mpi4py", "horovod"])
def test_framework_packages_missing_from_a_custom_image(tmp_path, env, framework, needle):
    r = check(tmp_path, one_distribution(A100, env, f"type: mpi\nframework: {framework}\nprocess_count_per_instance: 8\n"))
    d = r.one("distribution.packages-missing", "error", "environment: env")
    assert needle in d.message and "requires:" in d.hint


def test_framework_packages_unknown_in_a_curated_environment(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: mpi\nframework: deepspeed\n"
                                                          "process_count_per_instance: 8\n"))
    d = r.one("distribution.packages-unverified", "warning", "environment: env")
    assert "carries mpi4py is unknown" in d.message  # ACPT carries DeepSpeed: only mpi4py is in doubt


@pytest.mark.parametrize("env, framework", [
    ("build: {template: openmpi-rdma, parameters: {pip_packages: ['DeepSpeed==0.14.4']}}", "deepspeed"),
    (CUSTOM_IMAGE + "\nrequires: [openmpi, deepspeed, mpi4py]", "deepspeed"),
    (CUSTOM_IMAGE + "\nrequires: [openmpi]\nconda_file: conda.yml", "horovod"),
    ("curated: azureml:AzureML-tensorflow-2.7-ubuntu20.04-py38-cuda11-gpu@latest", "horovod"),
], ids=["template-adds-mpi4py", "declared", "conda-file", "curated-horovod"])
def test_framework_packages_present(tmp_path, env, framework):
    (tmp_path / "conda.yml").write_text("dependencies:\n  - python=3.10\n  - pip:\n    - horovod[pytorch]==0.28.1\n",
                                        encoding="utf-8")
    r = check(tmp_path, one_distribution(A100, env, f"type: mpi\nframework: {framework}\nprocess_count_per_instance: 8\n"))
    assert r.diagnostics == []


def test_openmpi_rdma_template_installs_mpi4py_for_deepspeed():
    from infra_cli.image.dockerfile import render_dockerfile

    assert "--no-binary=mpi4py mpi4py" in render_dockerfile("openmpi-rdma", {"pip_packages": ["deepspeed>=0.14"]})
    assert "mpi4py" not in render_dockerfile("openmpi-rdma", {"pip_packages": ["transformers"]})
# (end of the launcher, TensorFlow and image tests)


def test_issue_examples_for_sizes(tmp_path):
    # issue 11: two nodes of Standard_NC4as_T4_v3 were only a size-unknown warning; now it is catalogued
    r = check(tmp_path, one_distribution("Standard_NC4as_T4_v3", CURATED_ENV, "type: pytorch\ninstance_count: 2\n"))
    assert not r.of("cluster.size-unknown")
    assert "no InfiniBand" in r.one("distribution.multinode-without-infiniband", "warning", "instance_count: 2").message
    # a did-you-mean reads names in any case, as Azure does, and stays in the family
    r = check(tmp_path, "clusters:\n  gpu:\n    size: standard_nd96asr_v5\n")
    assert "did you mean 'Standard_ND96asr_v4'" in r.one("cluster.size-unknown", "warning", "standard_nd96asr_v5").hint


@pytest.mark.parametrize("image", ["ubuntu:22.04\\nRUN touch /tmp/PWN", "./good", "Repo/Upper:1", "a.io/x@sha256:zz"])
def test_environment_image_is_an_image_reference(tmp_path, image):
    r = check(tmp_path, f'environments:\n  env:\n    image: "{image}"\n')
    d = r.one("environment.image-reference", "error", f'image: "{image}"')
    assert "distribution/reference" in d.hint
    assert not check(tmp_path, "environments:\n  env:\n    image: mcr.microsoft.com/azureml/x:1\n").diagnostics


# ---- guide 002's MPI per-node launch, CPU MPI on HPC sizes, build contexts (issue 23) --------------------

PER_NODE_MPI = ("type: mpi\ninstance_count: 2\nprocess_count_per_instance: 1\n"
                "command: 'torchrun --nnodes 2 --nproc_per_node 8 --node_rank {rank} "
                "--master_addr $(echo $AZ_BATCH_MASTER_NODE | cut -d: -f1) --master_port 6105 train.py'\n")


def errors(r: Checked) -> list[Diagnostic]:
    return [d for d in r.diagnostics if d.severity == "error"]


@pytest.mark.parametrize("command", [
    PER_NODE_MPI.format(rank="$OMPI_COMM_WORLD_NODE_RANK"),
    "type: mpi\ninstance_count: 2\nlauncher: per-node\ncommand: python launch.py --node-rank=$${OMPI_COMM_WORLD_NODE_RANK}\n",
], ids=["torchrun", "own-script"])
def test_ompi_node_rank_is_not_the_node_rank_and_the_hint_fixes_it(tmp_path, command):
    # Guide 002 (cheat sheet, "Environment variables from Open MPI"): OMPI_COMM_WORLD_NODE_RANK is not the node
    # rank; with one process per node OMPI_COMM_WORLD_RANK is.
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, command, "infiniband: required", max_instances=2))
    d = r.one("distribution.node-rank-variable", "error", "command: ")
    assert "$OMPI_COMM_WORLD_RANK" in d.hint and "process_count_per_instance: 1" in d.hint
    fixed = command.replace("OMPI_COMM_WORLD_NODE_RANK", "OMPI_COMM_WORLD_RANK")
    assert check(tmp_path, one_distribution(A100, CURATED_ENV, fixed, "infiniband: required", max_instances=2)) \
        .diagnostics == []


def test_ompi_node_rank_on_one_node_is_right_and_clean(tmp_path):
    dist = PER_NODE_MPI.format(rank="$OMPI_COMM_WORLD_NODE_RANK").replace("instance_count: 2", "instance_count: 1")
    assert not check(tmp_path, one_distribution(A100, CURATED_ENV, dist)).of("distribution.node-rank-variable")


def test_a_pipe_inside_a_substitution_keeps_the_launchers_flags(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, PER_NODE_MPI.format(rank="$OMPI_COMM_WORLD_RANK"),
                                         "infiniband: required", max_instances=2))
    assert r.diagnostics == []


def test_cpu_mpi_on_an_hpc_size_is_clean_and_cpu_pytorch_still_warns(tmp_path):
    env = "image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest"
    hb = "Standard_HB120rs_v3"
    assert check(tmp_path, one_distribution(hb, env, "type: mpi\ninstance_count: 2\nprocess_count_per_instance: 120\n",
                                            "infiniband: required")).diagnostics == []
    d = check(tmp_path, one_distribution(hb, env, "type: pytorch\n")).one("distribution.no-gpus", "warning",
                                                                         "cluster: gpu")
    assert "type: mpi" in d.hint


# Every hint below is followed literally and the stack validated again: the rule is gone and no error is new.

def test_a_retired_sizes_hint_keeps_the_infiniband_the_cluster_requires(tmp_path):
    body = "clusters:\n  gpu:\n    size: Standard_NC24s_v3\n    infiniband: required\n"
    d = check(tmp_path, body).of("cluster.size-retired")[0]
    named = d.hint.split("e.g. ")[1].split(" (")[0].split(", ")
    for size in named:
        after = check(tmp_path, body.replace("Standard_NC24s_v3", size))
        assert errors(after) == [], (size, after.diagnostics)


def test_tensorflow_hint_respects_max_instances(tmp_path):
    dist = "type: tensorflow\ninstance_count: 2\nworker_count: 16\n"
    d = check(tmp_path, one_distribution(A100, CURATED_ENV, dist, "infiniband: required", max_instances=2)) \
        .one("distribution.tensorflow-counts", "error", "worker_count: 16")
    assert "set worker_count: 2" in d.hint and "max_instances raised to 16" in d.hint
    for fixed, most in ((dist.replace("worker_count: 16", "worker_count: 2"), 2),
                        (dist.replace("instance_count: 2", "instance_count: 16"), 16)):
        after = check(tmp_path, one_distribution(A100, CURATED_ENV, fixed, "infiniband: required", max_instances=most))
        assert errors(after) == [], after.diagnostics


def _deepspeed_conda(tmp_path: Path, packages: str) -> str:
    (tmp_path / "conda.yml").write_text("dependencies:\n  - python=3.10\n  - pip:\n" + packages, encoding="utf-8")
    return one_distribution(A100, CUSTOM_IMAGE + "\nconda_file: conda.yml\nrequires: [openmpi>=4.1]",
                            "type: mpi\nframework: deepspeed\nprocess_count_per_instance: 8\n")


def test_a_package_missing_from_a_read_conda_file_is_added_there_not_declared(tmp_path):
    d = check(tmp_path, _deepspeed_conda(tmp_path, "    - deepspeed\n")).one(
        "distribution.packages-missing", "error", "environment: env")
    assert "add mpi4py to conda.yml" in d.hint and "`requires: [" not in d.hint, d.hint
    after = check(tmp_path, _deepspeed_conda(tmp_path, "    - deepspeed\n    - mpi4py\n"))
    assert errors(after) == [], after.diagnostics


def _context(tmp_path: Path, dockerfile: str, requirements: str = "") -> str:
    (tmp_path / "ctx").mkdir(exist_ok=True)
    (tmp_path / "ctx" / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    (tmp_path / "ctx" / "requirements.txt").write_text(requirements, encoding="utf-8")
    return one_distribution(A100, "build: {path: ctx}", "type: mpi\nframework: deepspeed\nprocess_count_per_instance: 8\n")


OPENMPI_BASE = "mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.8-cudnn8-ubuntu22.04"


@pytest.mark.parametrize("dockerfile", [
    f"FROM {OPENMPI_BASE}:latest\nCOPY requirements.txt .\n",
    f"ARG BASE={OPENMPI_BASE}\nARG TAG=\"20240101\"\nFROM $BASE:${{TAG}} AS build\nFROM build\nCOPY --chown=1:1 requirements.txt /r/\n",
    f"FROM python:3.11 AS tools\nFROM {OPENMPI_BASE}:1 AS final\nCOPY --from=tools /x /x\nCOPY ./requirements.txt \\\n  /tmp/\n",
], ids=["plain", "arg-and-alias", "last-stage"])
def test_a_build_context_is_read_from_its_dockerfile(tmp_path, dockerfile):
    """The final stage's FROM (ARG defaults, stage aliases) and the pip file it copies feed MPI and packages."""
    r = check(tmp_path, _context(tmp_path, dockerfile, "deepspeed>=0.14\n"))
    assert not r.of("distribution.mpi-missing"), r.diagnostics
    d = r.one("distribution.packages-missing", "error", "environment: env")
    assert "add mpi4py to ctx/requirements.txt" in d.hint, d.hint
    assert errors(check(tmp_path, _context(tmp_path, dockerfile, "deepspeed>=0.14\nmpi4py\n"))) == []


@pytest.mark.parametrize("dockerfile", [
    "FROM ubuntu:22.04\nCOPY requirements.txt .\n",
    "ARG BASE\nFROM $BASE\n",                                      # decided at build time: unknown
    f"FROM {OPENMPI_BASE}:1 AS mpi\nFROM ubuntu:22.04\nCOPY --from=mpi /usr/local /usr/local\n",
], ids=["plain-ubuntu", "arg-without-default", "mpi-only-in-an-earlier-stage"])
def test_a_build_context_without_an_mpi_base_still_needs_mpi(tmp_path, dockerfile):
    r = check(tmp_path, _context(tmp_path, dockerfile, "deepspeed\nmpi4py\n"))
    d = r.one("distribution.mpi-missing", "error", "environment: env")
    assert "build FROM an AzureML Open MPI base image" in d.hint and "ctx/Dockerfile" in d.hint, d.hint
    # the hint followed: the final stage builds FROM an AzureML Open MPI base image
    fixed = dockerfile.rsplit("FROM ", 1)[0] + f"FROM {OPENMPI_BASE}:latest\nCOPY requirements.txt .\n"
    assert errors(check(tmp_path, _context(tmp_path, fixed, "deepspeed\nmpi4py\n"))) == []


def test_the_mpi_per_node_rendezvous_hint_leads_to_a_clean_stack(tmp_path):
    dist = "type: mpi\ninstance_count: 2\nprocess_count_per_instance: 1\ncommand: torchrun --nnodes 2 --nproc_per_node 8 t.py\n"
    body = one_distribution(A100, CURATED_ENV, dist, "infiniband: required", max_instances=2)
    d = check(tmp_path, body).of("distribution.launcher-rendezvous")[0]
    assert "--rdzv_endpoint $AZ_BATCH_MASTER_NODE" in d.hint and "$OMPI_COMM_WORLD_RANK" in d.hint, d.hint
    fixed = body.replace("t.py", "--rdzv_endpoint $AZ_BATCH_MASTER_NODE --node_rank $OMPI_COMM_WORLD_RANK t.py")
    assert check(tmp_path, fixed).diagnostics == []


def _sizes_named(hint: str) -> list[str]:
    return hint.split("size (")[1].split(")")[0].split(", ")


@pytest.mark.parametrize("rule, at", [
    ("cluster.infiniband-ineligible", "size: Standard_NC96ads_A100_v4"),
    ("distribution.multinode-without-infiniband", "instance_count: 2"),
])
def test_infiniband_hints_name_sizes_with_the_gpus_the_processes_need(tmp_path, rule, at):
    """8 processes per node: a suggested InfiniBand size with 4 GPUs (GB200) would be gpus-exceeded next."""
    body = one_distribution("Standard_NC96ads_A100_v4", CURATED_ENV,
                            "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 8\n", "infiniband: required")
    d = check(tmp_path, body).one(rule, "error", at)
    for size in _sizes_named(d.hint):
        after = check(tmp_path, body.replace("Standard_NC96ads_A100_v4", size))
        assert errors(after) == [], (size, after.diagnostics)


@pytest.mark.parametrize("text, base, copied, pip", [
    ("FROM a:1\n", "a:1", (), ()),
    ("# c\nARG R=mcr.microsoft.com\nARG T\nFROM --platform=linux/amd64 ${R}/x:${T:-2} AS b\nFROM b\n",
     "mcr.microsoft.com/x:2", (), ()),
    ("ARG T\nFROM x:$T\n", None, (), ()),                          # an ARG without a default: set at build time
    ('FROM a\nCOPY --chown=1:1 ["conda.yml", "req.txt", "/tmp/"]\nADD --from=b /x /y\n', "a", ("conda.yml", "req.txt"), ()),
    ("FROM a AS one\nFROM one AS two\nFROM two\nRUN pip install -U deepspeed==0.14 \\\n  mpi4py && python3 -m pip install x\n",
     "a", (), ("deepspeed==0.14", "mpi4py", "x")),
    ("FROM loop AS loop\n", None, (), ()),                         # a stage named after itself: no base known
    ("", None, (), ()),
])
def test_dockerfile_reading(text, base, copied, pip):
    facts = read_dockerfile(text)
    assert (facts.base_image, facts.copied, facts.pip_installs) == (base, copied, pip)


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

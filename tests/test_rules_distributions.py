"""The rules of infra_cli/validate/rules/distributions.py (job keys, references, InfiniBand between nodes, GPUs,
instances, MPI and packages, framework), each on a minimal stack that breaks it. Each test fails if its rule is removed."""

from __future__ import annotations

import pytest

from rules_fixtures import A100, CURATED_ENV, CUSTOM_IMAGE, OPENMPI_BASE, _context, _deepspeed_conda, _sizes_named, check, errors, one_distribution


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


def test_framework_launched_per_node_by_its_command(tmp_path):
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: mpi\nframework: horovod\n"
                                                          "command: torchrun --nproc_per_node 8 train.py\n"))
    d = r.one("distribution.framework-launcher", "error", "command: torchrun")
    assert "per node" in d.message and "process_count_per_instance" in d.hint


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


def test_cpu_mpi_on_an_hpc_size_is_clean_and_cpu_pytorch_still_warns(tmp_path):
    env = "image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest"
    hb = "Standard_HB120rs_v3"
    assert check(tmp_path, one_distribution(hb, env, "type: mpi\ninstance_count: 2\nprocess_count_per_instance: 120\n",
                                            "infiniband: required")).diagnostics == []
    d = check(tmp_path, one_distribution(hb, env, "type: pytorch\n")).one("distribution.no-gpus", "warning",
                                                                         "cluster: gpu")
    assert "type: mpi" in d.hint


def test_a_package_missing_from_a_read_conda_file_is_added_there_not_declared(tmp_path):
    d = check(tmp_path, _deepspeed_conda(tmp_path, "    - deepspeed\n")).one(
        "distribution.packages-missing", "error", "environment: env")
    assert "add mpi4py to conda.yml" in d.hint and "`requires: [" not in d.hint, d.hint
    after = check(tmp_path, _deepspeed_conda(tmp_path, "    - deepspeed\n    - mpi4py\n"))
    assert errors(after) == [], after.diagnostics


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


# ---- what Azure ML does not bind (issue 41) ------------------------------------------------------------------

BOUND = ("type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 8\n"
         "inputs: {data: {type: uri_folder, path: 'azureml://datastores/d/paths/p'}}\n"
         "outputs: {model: {type: uri_folder}}\n")


def test_a_binding_with_one_pair_of_braces_is_passed_literally(tmp_path):
    """A Python f-string turns ${{inputs.data}} into ${inputs.data}; in a stack it is written $${inputs.data} (the
    escape for a literal ${). Azure ML passes it as written and bash stops ("bad substitution")."""
    command = "python train.py --data $${inputs.data} --model ${{outputs.model}}"
    body = one_distribution(A100, CURATED_ENV, BOUND + f"command: {command}\n")
    d = check(tmp_path, body).one("distribution.binding-single-braces", "error", "command: python")
    assert "${inputs.data}" in d.message and "bad substitution" in d.message and "${{inputs.data}}" in d.hint
    fixed = body.replace("$${inputs.data}", "${{inputs.data}}")
    assert check(tmp_path, fixed).diagnostics == []
    # a shell variable of the command's own (${HOME}, ${NODE_RANK}) is no binding
    assert not check(tmp_path, fixed.replace("python train.py", "cd $${HOME} && python train.py")).of(
        "distribution.binding-single-braces")


def test_a_binding_in_an_environment_variable_is_not_bound(tmp_path):
    body = one_distribution(A100, CURATED_ENV, BOUND + "environment_variables:\n  DATA: ${{inputs.data}}\n"
                            "command: python train.py --model ${{outputs.model}}\n")
    d = check(tmp_path, body).one("distribution.binding-in-variables", "error", "DATA: ")
    assert "command only" in d.message and "DATA=${{inputs.data}}" in d.hint
    moved = body.replace("    environment_variables:\n      DATA: ${{inputs.data}}\n", "").replace(
        "command: python", "command: DATA=${{inputs.data}} python")
    assert check(tmp_path, moved).diagnostics == []


def test_a_declared_input_or_output_the_command_never_names(tmp_path):
    body = one_distribution(A100, CURATED_ENV, BOUND + "command: python train.py --data ${{inputs.data}}\n")
    d = check(tmp_path, body).one("distribution.binding-unused", "warning", "model: ")
    assert "${{outputs.model}}" in d.message and "remove it from `outputs:`" in d.hint
    named = body.replace("--data ${{inputs.data}}", "--data ${{inputs.data}} --model ${{outputs.model}}")
    assert check(tmp_path, named).diagnostics == []


# Jobs without a distribution type and ray distributions (issue 41)

def test_a_job_without_a_distribution_type_on_several_nodes_runs_alone_on_each(tmp_path):
    body = one_distribution(A100, CURATED_ENV, "instance_count: 2\ncommand: python prep.py\n")
    d = check(tmp_path, body).one("distribution.untyped-nodes", "warning", "instance_count: 2")
    assert "each node alone" in d.message and "instance_count: 1" in d.hint
    assert check(tmp_path, body.replace("instance_count: 2", "instance_count: 1")).diagnostics == []
    typed = one_distribution(A100, CURATED_ENV, "type: pytorch\ninstance_count: 2\nprocess_count_per_instance: 8\n"
                             "command: python train.py\n")
    assert check(tmp_path, typed).of("distribution.untyped-nodes") == []


@pytest.mark.parametrize("command", ["python preprocess.py --rows 10", "torchrun --standalone --nproc_per_node 8 train.py"])
def test_a_single_node_job_without_a_type_is_judged_on_what_it_runs(tmp_path, command):
    """No distribution: one process (a preprocessing step, a script that picks its GPU) or a launcher that starts
    its own per GPU (torchrun --standalone): no GPU count, no framework type, no head-node launcher to judge."""
    assert check(tmp_path, one_distribution(A100, CURATED_ENV, f"command: {command}\n")).diagnostics == []
    # ... while a launcher that starts more processes than the node has GPUs is still what it is
    over = check(tmp_path, one_distribution(A100, CURATED_ENV, "command: torchrun --standalone --nproc_per_node 16 "
                                                               "train.py\n"))
    assert [d.rule for d in over.diagnostics] == ["distribution.gpus-exceeded"]


def test_a_job_without_a_type_refuses_a_distributions_process_count(tmp_path):
    from infra_cli.stack.load import SchemaErrors
    with pytest.raises(SchemaErrors, match="process_count_per_instance is no key of a job without a distribution "
                                           "type: set type"):
        check(tmp_path, one_distribution(A100, CURATED_ENV, "process_count_per_instance: 8\ncommand: python t.py\n"))


RAY = "distribution:\n  type: ray\n  port: 6379\n  dashboard_port: 8265\ninstance_count: 2\ncommand: python tune.py\n"


def test_a_ray_distribution_on_an_infiniband_size_is_clean(tmp_path):
    """Ray takes every GPU of its node: no process count to judge; azure-ai-ml's dist_job_ray_1.yml shape."""
    assert check(tmp_path, one_distribution(A100, CURATED_ENV, RAY)).diagnostics == []


def test_a_multi_node_ray_job_without_infiniband_is_warned_as_any_gpu_job(tmp_path):
    d = check(tmp_path, one_distribution("Standard_NC24ads_A100_v4", CURATED_ENV, RAY)).one(
        "distribution.multinode-without-infiniband", "warning", "instance_count: 2")
    assert "2 nodes" in d.message


def test_ray_and_its_dashboard_on_one_port(tmp_path):
    body = one_distribution(A100, CURATED_ENV, RAY.replace("8265", "6379"))
    d = check(tmp_path, body).one("distribution.ray-settings", "error", "dashboard_port: 6379")
    assert "one port, 6379" in d.message and "8265" in d.hint


@pytest.mark.parametrize("args", ["--num-gpus 16", "--disable-usage-stats --num-gpus=9"])
def test_ray_told_of_more_gpus_than_the_size_has(tmp_path, args):
    body = one_distribution(A100, CURATED_ENV, RAY.replace("  dashboard_port: 8265\n", "  dashboard_port: 8265\n"
                                                           f"  worker_node_additional_args: {args}\n"))
    d = check(tmp_path, body).one("distribution.ray-settings", "error", f"worker_node_additional_args: {args}")
    assert "8 GPU(s)" in d.message and "at most 8" in d.hint
    assert check(tmp_path, body.replace(args, "--num-gpus 8")).of("distribution.ray-settings") == []


@pytest.mark.parametrize("dist, said", [
    ("type: pytorch\ndistribution: {port: 1234}\n", "port is no key of a pytorch distribution"),
    ("distribution: {type: ray}\nprocess_count_per_instance: 8\n", "process_count_per_instance is no key of a ray"),
    ("distribution: {include_dashboard: true}\n", "include_dashboard is no key of a job without a distribution type"),
])
def test_a_key_of_another_distribution_type_is_refused_as_azure_ai_ml_refuses_it(tmp_path, dist, said):
    from infra_cli.stack.load import SchemaErrors
    with pytest.raises(SchemaErrors, match=said):
        check(tmp_path, one_distribution(A100, CURATED_ENV, dist))


def test_a_job_without_a_type_may_start_its_own_launcher_and_name_its_framework(tmp_path):
    """No distribution: Azure ML starts the command once, so mpirun on the node is the command's own launch (not a
    head-node launcher inside Azure ML's), and a framework runs under whatever the command starts (no type to
    disagree with); the same command under type pytorch is both."""
    body = one_distribution(A100, CURATED_ENV, "framework: horovod\ncommand: mpirun -np 8 python train.py\n")
    assert check(tmp_path, body).diagnostics == []
    typed = check(tmp_path, one_distribution(A100, CURATED_ENV, "type: pytorch\nprocess_count_per_instance: 8\n"
                                             "framework: horovod\ncommand: mpirun -np 8 python train.py\n"))
    assert {"distribution.head-node-launcher", "distribution.framework-type"} <= {d.rule for d in typed.diagnostics}

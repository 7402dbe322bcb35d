"""The rules of infra_cli/validate/rules/environments.py (requires, files, build contexts and templates, image
references, upload limits), each on a minimal stack that breaks it. Each test fails if its rule is removed."""

from __future__ import annotations

import pytest

from infra_cli.validate.dockerfile import read_dockerfile

from rules_fixtures import check


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


def test_pasted_environment_name_must_equal_the_key(tmp_path):
    """An `az ml environment` YAML pastes with its $schema and name (azure-ai-ml's own test files do)."""
    schema = "$schema: https://azuremlschemas.azureedge.net/latest/environment.schema.json\n    "
    r = check(tmp_path, f"environments:\n  env:\n    {schema}name: myTestEnv\n    image: x.azurecr.io/t:1\n")
    r.one("environment.name-mismatch", "error", "name: myTestEnv")
    r = check(tmp_path, f"environments:\n  myTestEnv:\n    {schema}name: myTestEnv\n    image: x.azurecr.io/t:1\n")
    assert r.diagnostics == []


@pytest.mark.parametrize("image", ["ubuntu:22.04\\nRUN touch /tmp/PWN", "./good", "Repo/Upper:1", "a.io/x@sha256:zz"])
def test_environment_image_is_an_image_reference(tmp_path, image):
    r = check(tmp_path, f'environments:\n  env:\n    image: "{image}"\n')
    d = r.one("environment.image-reference", "error", f'image: "{image}"')
    assert "distribution/reference" in d.hint
    assert not check(tmp_path, "environments:\n  env:\n    image: mcr.microsoft.com/azureml/x:1\n").diagnostics


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


def _build_context(tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text("FROM mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest\n")
    return ctx


def test_a_dockerfile_outside_its_build_context(tmp_path):
    _build_context(tmp_path)
    (tmp_path / "Dockerfile").write_text("FROM a:1\n")
    r = check(tmp_path, "environments:\n  env:\n    build: {path: ctx, dockerfile_path: ../Dockerfile}\n")
    r.one("paths.outside-context", "error", "dockerfile_path: ../Dockerfile")


def test_a_link_in_a_build_context_is_not_uploaded(tmp_path):
    (_build_context(tmp_path) / "data").symlink_to(tmp_path / "elsewhere")
    r = check(tmp_path, "environments:\n  env:\n    build: {path: ctx}\n")
    assert "data" in r.one("paths.context-skipped", "warning", "path: ctx").message


def test_a_code_directory_larger_than_a_snapshot(tmp_path):
    code = tmp_path / "src"
    code.mkdir()
    for i in range(2001):   # one more than Azure ML's 2,000 files
        (code / f"f{i}").touch()
    body = ("clusters:\n  gpu: {size: Standard_ND96asr_v4}\nenvironments:\n  env: {curated: "
            "'azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest'}\ndistributions:\n  job: {cluster: gpu, "
            "environment: env, type: pytorch, process_count_per_instance: 8, command: python train.py, code: src}\n")
    assert "2001 files" in check(tmp_path, body).one("paths.context-large", "warning", "code: src").message
    (code / "f0").unlink()
    assert not check(tmp_path, body).diagnostics

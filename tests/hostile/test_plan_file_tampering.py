"""A plan file is a request, not an order (issue 22, item 1): edited actions, values, digests and HMACs are
refused, prevent_destroy and ownership hold at apply whatever the file says, and nothing changes on refusal.

One emulator and one applied stack serve the whole module: every refusal leaves the live state as it was
(each test checks that); the one apply that succeeds has a world of its own, so the tests pass in any order. An attacker here knows the file format,
so most edits also recompute the sha256 digest (`reseal`); only INFRA_PLAN_KEY's HMAC cannot be forged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from emulator_fixtures import (TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE, WORKSPACE_YAML,
                               start_emulator)

from infra_cli.apply.engine import apply_outcome, prepare_from_plan_file
from infra_cli.azure.provider import AzureProvider
from infra_cli.commands.backend import provider_for
from infra_cli.diagnostics import DiagnosticError
from infra_cli.plan.engine import plan_stack
from infra_cli.plan.model import DELETE, REPLACE, ResourceChange
from infra_cli.plan.planfile import write_plan_file
from infra_cli.stack.load import load_stack
from infra_cli.stack.model import Workspace

ROOT = Path(__file__).resolve().parents[2]
KEY = "plan-key-Zq81!never-shown"

STACK = f"""
stack: guarded
{WORKSPACE_YAML}clusters:
  a100:
    size: Standard_ND96asr_v4
    max_instances: 2
    lifecycle: {{prevent_destroy: true}}
  spare:
    size: Standard_NC24ads_A100_v4
    max_instances: 1
"""
# the change the plan files carry: a100 scales in place, a new cluster is created
CHANGED = STACK.replace("max_instances: 2", "max_instances: 3") + """  fresh:
    size: Standard_NC24ads_A100_v4
    max_instances: 1
"""


def _cli(world, *args: str, key: str | None = None) -> subprocess.CompletedProcess:
    # MLClient in this test process set AZUREML_CURRENT_CLOUD to its emulator's cloud; a child must not inherit it
    env = {k: v for k, v in os.environ.items() if k not in ("AZUREML_CURRENT_CLOUD", "INFRA_PLAN_KEY")}
    env.update(INFRA_EMULATOR_URL=world.server.url, INFRA_LOCAL_DIR=str(world.state))
    if key is not None:
        env["INFRA_PLAN_KEY"] = key
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr
    assert KEY not in r.stdout + r.stderr
    return r


def _live(clients) -> dict:
    return {c.name: (c.size.lower(), c.max_instances, (c.tags or {}).get("infra.stack"))
            for c in clients.ml.compute.list()}


@contextlib.contextmanager
def _world(root: Path):
    """An emulator with the stack applied, a cluster of no stack's, the stack edited and two plan files of it
    (plain and signed)."""
    from azure.ai.ml.entities import AmlCompute

    from infra_cli.commands.backend import build_clients

    state = root / "local"
    server = start_emulator(state)
    try:
        clients = build_clients(Workspace(subscription_id=TEST_SUBSCRIPTION, resource_group=TEST_RESOURCE_GROUP,
                                          name=TEST_WORKSPACE, location=TEST_LOCATION), local=True, emulator=server)
        stack = root / "stack.yaml"
        stack.write_text(STACK)
        assert apply_outcome(plan_stack(load_stack(stack), AzureProvider(clients))).ok
        clients.ml.compute.begin_create_or_update(AmlCompute(name="victim", size="Standard_NC24ads_A100_v4",
                                                             max_instances=1)).result()   # no infra tag
        stack.write_text(CHANGED)
        world = SimpleNamespace(server=server, state=state, clients=clients, root=root, stack=stack)
        world.plain, world.signed = root / "plain.plan", root / "signed.plan"
        assert _cli(world, "plan", str(stack), "--local", "--out", str(world.plain)).returncode == 0
        assert _cli(world, "plan", str(stack), "--local", "--out", str(world.signed), key=KEY).returncode == 0
        world.before = _live(clients)
        assert world.before["a100"][1] == 2 and "fresh" not in world.before and world.before["victim"][2] is None
        yield world
    finally:
        server.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The module's world: no test changes it (each refusal checks that nothing changed)."""
    with _world(tmp_path_factory.mktemp("tamper")) as shared:
        yield shared


def _edited(world, tmp_path: Path, edit, *, source: Path | None = None, reseal: bool = True) -> Path:
    """A copy of a plan file with `edit(body)` applied, its digest recomputed as anyone can (`reseal`)."""
    body = json.loads((source or world.plain).read_text())
    edit(body)
    if reseal:
        content = {k: v for k, v in body.items() if k not in ("digest", "hmac")}
        body["digest"] = "sha256:" + hashlib.sha256(
            json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    out = tmp_path / "edited.plan"
    out.write_text(json.dumps(body, indent=2))
    return out


def _change(body: dict, address: str) -> dict:
    return next(c for c in body["resource_changes"] if c["address"] == address)


def _refused(world, path: Path, rule: str, *words: str, key: str | None = None) -> str:
    r = _cli(world, "apply", str(path), "--local", "--auto-approve", "--no-smoke", key=key)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"error[{rule}]" in r.stderr and all(w in r.stderr for w in words), r.stderr
    assert "destroyed [" not in r.stdout and "updated [" not in r.stdout
    assert _live(world.clients) == world.before
    return r.stderr


# ---- the attack: the protected cluster's actions edited to delete ------------------------------------

def to_delete(body: dict) -> None:
    change = _change(body, "cluster.a100")
    change["change"]["actions"], change["change"]["after"] = ["delete"], None


def test_actions_edited_to_delete_is_refused_as_changed(world, tmp_path):
    edited = _edited(world, tmp_path, to_delete, reseal=False)
    _refused(world, edited, "planfile.changed", "changed after infra plan wrote it", "infra plan")
    r = _cli(world, "show", str(edited))   # show checks the digest too
    assert r.returncode == 1 and r.stdout == "" and "error[planfile.changed]" in r.stderr


@pytest.mark.parametrize("edit, recorded", [
    (to_delete, '["delete"]'),
    (lambda b: _change(b, "cluster.a100")["change"].update(actions=["delete", "create"]), '["delete", "create"]'),
    # both changes turned into no-ops: apply would otherwise do nothing and say it is complete
    (lambda b: [c["change"].update(actions=["no-op"]) for c in b["resource_changes"]], "no change"),
])
def test_actions_edited_with_a_fresh_digest_are_derived_again_and_refused(world, tmp_path, edit, recorded):
    stderr = _refused(world, _edited(world, tmp_path, edit), "apply.plan-mismatch", "cluster.a100", recorded)
    assert 'the stack and the live state call for ["update"]' in stderr


def test_a_destroy_plan_of_a_cluster_the_stack_does_not_own_is_refused(world, tmp_path):
    victim = {"address": "cluster.victim", "type": "cluster", "name": "victim", "replace_paths": [],
              "action_reason": "no longer in the stack", "change": {"actions": ["delete"], "before": {}, "after": None}}

    def add_victim(body):
        body["resource_changes"].append(victim)

    def rename_spare(body):   # an address the stack has, pointed at another Azure resource
        spare = _change(body, "cluster.spare")
        spare["name"], spare["change"]["actions"], spare["change"]["after"] = "victim", ["delete"], None

    _refused(world, _edited(world, tmp_path, add_victim), "apply.plan-mismatch", "cluster.victim")
    _refused(world, _edited(world, tmp_path, rename_spare), "apply.plan-mismatch", "cluster.spare")


def test_edited_desired_state_with_a_fresh_digest_is_stale(world, tmp_path):
    def bigger(body):
        for resource in body["desired"]:
            if resource["address"] == "cluster.a100":
                resource["attributes"]["max_instances"] = 50
        _change(body, "cluster.a100")["change"]["after"]["max_instances"] = 50

    _refused(world, _edited(world, tmp_path, bigger), "apply.stale-plan", "changed since this plan was made")


def test_edited_values_of_a_change_with_a_fresh_digest_are_refused(world, tmp_path):
    def bigger(body):
        _change(body, "cluster.a100")["change"]["after"]["max_instances"] = 50

    _refused(world, _edited(world, tmp_path, bigger), "apply.plan-mismatch", "max_instances")


def test_edited_or_missing_digest_is_refused(world, tmp_path):
    def wrong(body):
        body["digest"] = "sha256:" + "0" * 64

    def gone(body):
        del body["digest"]

    _refused(world, _edited(world, tmp_path, wrong, reseal=False), "planfile.changed", "sha256 digest")
    _refused(world, _edited(world, tmp_path, gone, reseal=False), "planfile.changed", "no digest")


def test_a_resealed_file_of_the_wrong_shape_is_named_never_a_traceback(world, tmp_path):
    edits = {"actions infra does not know": lambda b: _change(b, "cluster.a100")["change"].update(actions=["boom"]),
             "a mode that is none": lambda b: b.update(mode="everything"),
             "a diagnostic that is a number": lambda b: b.update(diagnostics=[1]),
             "a smoke job that is an object": lambda b: b.update(smoke_jobs=[{}]),
             "targets that are a string": lambda b: b.update(targets="cluster.a100"),
             "a change that is a number": lambda b: b.update(resource_changes=[1])}
    for what, edit in edits.items():
        edited = _edited(world, tmp_path, edit)
        for command in (["show", str(edited)], ["apply", str(edited), "--local", "--auto-approve"]):
            r = _cli(world, *command)
            assert r.returncode == 1 and "error[planfile.invalid]" in r.stderr, (what, command, r.stderr)
    deep = tmp_path / "deep.plan"
    deep.write_text('{"kind": "infra-plan", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    r = _cli(world, "show", str(deep))
    assert r.returncode == 1 and "error[planfile.invalid]" in r.stderr and "cannot read plan file" in r.stderr
    assert _live(world.clients) == world.before


# ---- INFRA_PLAN_KEY: an HMAC nobody without the key can forge -----------------------------------------------

def test_signed_plan_file_holds_no_key_and_shows_with_it(world):
    text = world.signed.read_text()
    assert KEY not in text and '"hmac": "hmac-sha256:' in text and '"hmac"' not in world.plain.read_text()
    r = _cli(world, "show", str(world.signed), key=KEY)
    assert r.returncode == 0 and "cluster.a100" in r.stdout and "planfile" not in r.stderr
    r = _cli(world, "show", str(world.signed))   # readable without the key, with a warning that it was not checked
    assert r.returncode == 0 and "warning[planfile.unverified]" in r.stderr
    r = _cli(world, "show", str(world.signed), key="another key")
    assert r.returncode == 1 and "error[planfile.changed]" in r.stderr and "HMAC" in r.stderr


def test_hmac_mismatch_missing_or_unchecked_is_refused(world, tmp_path):
    # edited and resealed: the digest matches, the HMAC does not
    _refused(world, _edited(world, tmp_path, to_delete, source=world.signed), "planfile.changed",
             "HMAC does not match INFRA_PLAN_KEY", key=KEY)
    # the HMAC stripped, or a plan written without the key: refused while the key is set
    stripped = _edited(world, tmp_path, lambda b: b.pop("hmac"), source=world.signed)
    _refused(world, stripped, "planfile.unsigned", "carries no HMAC", "without INFRA_PLAN_KEY", key=KEY)
    _refused(world, world.plain, "planfile.unsigned", "carries no HMAC", key=KEY)
    # the right file with the wrong key, and a signed file whose HMAC apply cannot check
    _refused(world, world.signed, "planfile.changed", "HMAC", key="another key")
    _refused(world, world.signed, "planfile.unsigned", "INFRA_PLAN_KEY is not set")
    _refused(world, world.signed, "planfile.key-empty", "INFRA_PLAN_KEY is set but empty", key="")


# ---- prevent_destroy and ownership, enforced at apply whatever the file (or the stack on disk) says ----------

def test_prevent_destroy_from_the_last_apply_holds_when_the_stack_on_disk_drops_it(world, tmp_path):
    """The stack is edited to drop a100 (and its protection); plan refuses, so a file is made by hand without the
    plan's errors: apply derives them again from the live tag and refuses."""
    project = tmp_path / "edited"
    project.mkdir()
    stack = project / "stack.yaml"
    stack.write_text(CHANGED.replace("  a100:\n    size: Standard_ND96asr_v4\n    max_instances: 3\n"
                                     "    lifecycle: {prevent_destroy: true}\n", ""))
    outcome = plan_stack(load_stack(stack), AzureProvider(world.clients))
    assert "plan.prevent-destroy" in [d.rule for d in outcome.plan.diagnostics]
    assert next(c for c in outcome.plan.resource_changes if c.address == "cluster.a100").actions == DELETE
    outcome.plan.diagnostics = []
    planfile = tmp_path / "hand.plan"
    write_plan_file(planfile, outcome.plan, stack, [])
    _refused(world, planfile, "plan.prevent-destroy", "cluster.a100", "prevent_destroy")


def test_every_delete_and_replace_is_checked_under_the_lock_on_the_destroy_path(world):
    """A plan in memory (infra destroy's path) that would delete or replace what it must not: refused under the
    lock before anything is written, whatever its diagnostics say."""
    outcome = plan_stack(load_stack(world.stack), AzureProvider(world.clients), mode="destroy")
    assert outcome.plan.has_errors()   # plan refuses a100: prevent_destroy
    outcome.plan.diagnostics = []
    with pytest.raises(DiagnosticError) as caught:
        apply_outcome(outcome, operation="destroy")
    assert [d.rule for d in caught.value.diagnostics] == ["apply.prevent-destroy"]

    outcome = plan_stack(load_stack(world.stack), AzureProvider(world.clients))
    a100 = next(c for c in outcome.plan.resource_changes if c.address == "cluster.a100")
    outcome.plan.resource_changes = [
        *(c for c in outcome.plan.resource_changes if c is not a100),
        replace(a100, actions=REPLACE),                                              # protected
        ResourceChange("cluster.victim", "cluster", "victim", DELETE, {}, None),     # not the stack's
    ]
    with pytest.raises(DiagnosticError) as caught:
        apply_outcome(outcome)
    assert sorted(d.rule for d in caught.value.diagnostics) == ["apply.not-owned", "apply.prevent-destroy"]
    assert _live(world.clients) == world.before


def test_a_changed_plan_is_refused_before_anything_is_locked(world, tmp_path, monkeypatch):
    """The derivation runs before the lock too: a file whose changes were all made no-ops takes no lock."""
    monkeypatch.setenv("INFRA_EMULATOR_URL", world.server.url)
    monkeypatch.setenv("INFRA_LOCAL_DIR", str(world.state))
    edited = _edited(world, tmp_path, lambda b: [c["change"].update(actions=["no-op"]) for c in b["resource_changes"]])
    world.server.stats.reset()
    with pytest.raises(DiagnosticError) as caught:
        prepare_from_plan_file(edited, backend=provider_for(local=True), key=None, local=True)
    assert [d.rule for d in caught.value.diagnostics] == ["apply.plan-mismatch"]
    assert world.server.stats.writes == 0


# ---- the plan as written applies (in a world of its own: it changes the live state) ---------------------------

def test_the_plan_as_plan_wrote_it_applies_signed_or_not(tmp_path):
    with _world(tmp_path) as own:
        r = _cli(own, "apply", str(own.signed), "--local", "--no-smoke", key=KEY)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "1 added, 1 changed, 0 destroyed" in r.stdout
        live = _live(own.clients)
        assert live["a100"][1] == 3 and "fresh" in live and "victim" in live
        # the unsigned plan was made against the state before: now stale, refused, nothing changes
        r = _cli(own, "apply", str(own.plain), "--local", "--no-smoke")
        assert r.returncode == 1 and "apply.stale-plan" in r.stderr
        assert _live(own.clients) == live


# ---- plan --out writes through no link planted beside or at the file ----------------------------------------

def test_plan_out_writes_through_no_planted_link(world, tmp_path):
    """The temporary file plan --out writes first is fresh (O_EXCL|O_NOFOLLOW, a random name): a link planted where
    a fixed name (FILE.tmp) would be, or at FILE itself, is never written through."""
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "new.plan"
    (tmp_path / "new.plan.tmp").symlink_to(victim)
    assert _cli(world, "plan", str(world.stack), "--local", "--out", str(out)).returncode == 0
    assert victim.read_text() == "precious\n" and (tmp_path / "new.plan.tmp").is_symlink()
    assert not out.is_symlink() and '"kind": "infra-plan"' in out.read_text()
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    out.unlink()
    out.symlink_to(victim)          # a link at FILE: replaced by the plan, not followed
    assert _cli(world, "plan", str(world.stack), "--local", "--out", str(out)).returncode == 0
    assert victim.read_text() == "precious\n" and not out.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.plan", "new.plan.tmp", "victim"]   # no leftovers


# ---- a plan file over its size bound ------------------------------------------------------------------------

def test_a_plan_file_over_its_size_bound_is_refused_unread(tmp_path):
    """A sparse file one byte over MAX_PLAN_BYTES that starts as a plan does: refused by its size, before a byte of
    it is parsed (show and apply alike); one at the bound is read (and refused for what it holds)."""
    from infra_cli.plan.planfile import MAX_PLAN_BYTES, read_plan_file

    big = tmp_path / "big.plan"
    with open(big, "wb") as fh:
        fh.write(b'{"kind": "infra-plan", "pad": "')
        fh.truncate(MAX_PLAN_BYTES + 1)
    with pytest.raises(DiagnosticError) as caught:
        read_plan_file(big, key=None)
    assert f"larger than {MAX_PLAN_BYTES >> 20} MiB" in caught.value.diagnostics[0].message
    with open(big, "r+b") as fh:
        fh.truncate(MAX_PLAN_BYTES)
    with pytest.raises(DiagnosticError) as caught:
        read_plan_file(big, key=None)
    assert "larger than" not in caught.value.diagnostics[0].message     # read, and found not to be JSON
    with open(big, "r+b") as fh:
        fh.truncate(MAX_PLAN_BYTES + 1)
    env = {k: v for k, v in os.environ.items() if k != "INFRA_PLAN_KEY"}
    r = subprocess.run([sys.executable, "-m", "infra_cli", "show", str(big)], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=120)
    assert r.returncode == 1 and "error[planfile.invalid]" in r.stderr and "larger than 64 MiB" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr

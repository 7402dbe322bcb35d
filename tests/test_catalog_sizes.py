"""The SKU catalog as a whole (every GPU/HPC family, a source per row, retirement days), the size-name parser,
the parsed-catalog cache, and retirement judged against the live state by the plan's preflight."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra_cli.knowledge.skus import load_catalog
from infra_cli.diagnostics import DiagnosticError
from infra_cli.plan.model import CREATE, NO_OP, REPLACE, UPDATE, ResourceChange
from infra_cli.knowledge.size_name import parse_size_name
from infra_cli.stack.load import load_stack
from infra_cli.validate.engine import load_valid_stack
from infra_cli.plan.live import LiveFacts
from infra_cli.plan.preflight import LIVE_JUDGED_RULES, preflight, retired_sizes

ROOT = Path(__file__).resolve().parent.parent


# ---- the name parser --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, parts", [
    ("Standard_ND96isr_H100_v5", ("ND", 96, None, "isr", "H100", 5)),
    ("Standard_NC24ads_A100_v4", ("NC", 24, None, "ads", "A100", 4)),
    ("Standard_NC4as_T4_v3", ("NC", 4, None, "as", "T4", 3)),
    ("Standard_HB120-96rs_v3", ("HB", 120, 96, "rs", None, 3)),
    ("Standard_ND128isr_NDR_GB200_v6", ("ND", 128, None, "isr", "NDR_GB200", 6)),
    ("Standard_NC24r", ("NC", 24, None, "r", None, 1)),
    ("Standard_DS15_v2", ("DS", 15, None, "", None, 2)),
    ("standard_nd40rs_v2", ("ND", 40, None, "rs", None, 2)),   # Azure reads names in any case
    ("STANDARD_DS3_v2", ("DS", 3, None, "", None, 2)),          # as the azureml-examples write it
])
def test_size_names_parse_into_their_parts(name, parts):
    p = parse_size_name(name)
    assert (p.family, p.vcpus, p.active_vcpus, p.features, p.accelerator, p.version) == parts


@pytest.mark.parametrize("name, rdma", [("Standard_ND96asr_v4", True), ("Standard_NC24r", True),
                                        ("Standard_NC4as_T4_v3", False), ("Standard_DS15_v2", False),
                                        ("Standard_HX176-24rs", True), ("Standard_NC6_Promo", False)])
def test_rdma_is_the_r_among_the_feature_letters(name, rdma):
    assert parse_size_name(name).rdma is rdma


@pytest.mark.parametrize("name", ["Standard_Made_Up", "ND96asr_v4", "Standard_", "Standard_ND96asr_v4 extra", ""])
def test_names_outside_the_convention_do_not_parse(name):
    assert parse_size_name(name) is None


# ---- the catalog ------------------------------------------------------------------------------------------

def test_every_row_has_a_public_source_and_parses():
    catalog = load_catalog()
    for sku in catalog:
        assert sku.source.startswith("https://"), sku.name
        parsed = parse_size_name(sku.name)
        assert parsed is not None and parsed.gpu_or_hpc, sku.name
        # the name's `r` agrees with the row's RDMA fact
        assert parsed.rdma == sku.rdma, sku.name
        if sku.retirement_date not in (None, datetime.date.min):
            assert sku.retirement_source and sku.retirement_source.startswith("https://"), sku.name


def test_catalog_covers_every_gpu_and_hpc_family():
    catalog = load_catalog()
    for family in ("NC", "NCC", "ND", "NG", "NV", "HB", "HC", "HX", "H"):
        assert catalog.family_names(family), family
    for size in ("Standard_NC4as_T4_v3", "Standard_NC64as_T4_v3", "Standard_NC24ads_A100_v4", "Standard_NV36ads_A10_v5",
                 "Standard_NG32ads_V620_v1", "Standard_NV28adms_V710_v5", "Standard_HX176rs", "Standard_HB120-16rs_v3",
                 "Standard_NC6s_v3", "Standard_ND24rs", "Standard_NV6"):
        assert catalog.get(size) is not None, size


def test_retirement_days_as_azure_announced_them():
    catalog = load_catalog()
    day = datetime.date(2026, 1, 1)
    ncv3 = catalog.get("Standard_NC24rs_v3")
    assert ncv3.retirement_date == datetime.date(2025, 9, 30) and ncv3.retired_as_of(day)
    assert ncv3.infiniband_eligible  # retired, but what it was stays recorded
    nvv3 = catalog.get("Standard_NV12s_v3")
    assert nvv3.retiring_as_of(day) and not nvv3.retired_as_of(day)
    assert not catalog.get("Standard_ND96asr_v4").retired_as_of(day)
    assert catalog.get("Standard_ND96asr_v4").retirement_date is None


def test_unconfirmed_facts_stay_marked():
    catalog = load_catalog()
    assert "infiniband.generation" in catalog.get("Standard_NC24rs_v3").unconfirmed
    assert "sriov" in catalog.get("Standard_ND128isr_NDR_GB200_v6").unconfirmed
    assert "family" in catalog.get("Standard_ND96isr_H200_v5").unconfirmed


def _copy_validators(tmp_path: Path) -> Path:
    target = tmp_path / "validators"
    shutil.copytree(ROOT / "validators", target)
    return target


def _skus_json(env: dict) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "infra_cli", "skus", "--json"], capture_output=True, text=True,
                       cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_parsed_catalog_cache_follows_the_file(tmp_path):
    validators = _copy_validators(tmp_path)
    env = {**os.environ, "INFRA_VALIDATORS_DIR": str(validators), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = _skus_json(env)
    assert list((tmp_path / "cache" / "infra").glob("skus-*.json"))  # written on first use
    skus = validators / "skus.yaml"
    skus.write_text(skus.read_text(encoding="utf-8").replace(
        "  Standard_NC6: {gpus: 1,", "  Standard_NC6: {gpus: 3,"), encoding="utf-8")
    second = _skus_json(env)
    assert [r["gpus"] for r in first if r["name"] == "Standard_NC6"] == [1]
    assert [r["gpus"] for r in second if r["name"] == "Standard_NC6"] == [3]
    assert len(list((tmp_path / "cache" / "infra").glob("skus-*.json"))) == 1  # the stale version is gone


def test_a_broken_retirement_day_is_a_diagnostic(tmp_path):
    validators = _copy_validators(tmp_path)
    skus = validators / "skus.yaml"
    skus.write_text(skus.read_text(encoding="utf-8").replace("retired: 2023-09-06", "retired: someday", 1),
                    encoding="utf-8")
    env = {**os.environ, "INFRA_VALIDATORS_DIR": str(validators), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "stacks/ib-a100.yaml"], capture_output=True,
                       text=True, cwd=ROOT, env=env)
    assert r.returncode == 1 and "knowledge.invalid" in r.stderr and "someday" in r.stderr
    assert "Traceback" not in r.stderr


# ---- retired sizes: validate says error, plan knows whether the cluster exists ----------------------------

STACK = """\
stack: t
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw-test, location: eastus}
clusters:
  old:
    size: Standard_NC24rs_v3
    max_instances: 2
"""


def _change(actions: list[str]) -> ResourceChange:
    after = {"size": "Standard_NC24rs_v3", "max_instances": 2}
    return ResourceChange("cluster.old", "cluster", "old", actions, None if actions == CREATE else after, after)


@pytest.mark.parametrize("actions, severity", [(CREATE, "error"), (REPLACE, "error"), (NO_OP, "warning"),
                                               (UPDATE, "warning")])
def test_preflight_judges_a_retired_size_by_the_live_cluster(tmp_path, actions, severity):
    path = tmp_path / "stack.yaml"
    path.write_text(STACK, encoding="utf-8")
    loaded = load_stack(path)
    found = retired_sizes([_change(actions)], load_catalog(), loaded.source, today=datetime.date(2026, 1, 1))
    assert [(d.rule, d.severity, d.line) for d in found] == [("cluster.size-retired", severity, 5)]
    assert ("exists" in found[0].message) is (severity == "warning")
    # not yet retired on that day: nothing to say
    assert retired_sizes([_change(actions)], load_catalog(), loaded.source, today=datetime.date(2025, 1, 1)) == []


def test_plan_validation_leaves_the_retired_verdict_to_preflight(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_text(STACK, encoding="utf-8")
    with pytest.raises(DiagnosticError) as exc:  # what `validate` and every offline command say
        load_valid_stack(path)
    assert [d.rule for d in exc.value.diagnostics] == ["cluster.size-retired"]
    loaded, warnings = load_valid_stack(path, judged_live=LIVE_JUDGED_RULES)  # what the plan loads
    assert warnings == []
    facts = LiveFacts(location="eastus", workspace_location="eastus")
    found = preflight([_change(NO_OP)], [], facts, load_catalog(), loaded.source, "mlw-test")
    assert [(d.rule, d.severity) for d in found] == [("cluster.size-retired", "warning")]


def test_plan_stopped_by_another_error_still_shows_the_retired_size(tmp_path):
    """`validate` shows cluster.size-retired and the other error; a plan that the other error stops before it
    reads the live state shows both too (before: only the other one)."""
    path = tmp_path / "stack.yaml"
    path.write_text(STACK + "distributions:\n  d: {cluster: old, environment: nope, type: pytorch, instance_count: 1, "
                    "process_count_per_instance: 4}\n", encoding="utf-8")
    with pytest.raises(DiagnosticError) as offline:
        load_valid_stack(path)
    with pytest.raises(DiagnosticError) as planned:
        load_valid_stack(path, judged_live=LIVE_JUDGED_RULES)
    rules = sorted(d.rule for d in offline.value.diagnostics)
    assert rules == ["cluster.size-retired", "distribution.dangling-reference"]
    assert sorted(d.rule for d in planned.value.diagnostics) == rules
    env = {**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state")}
    r = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(path), "--local"], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert sorted(re.findall(r"error\[([a-z.-]+)\]", r.stderr)) == rules, r.stderr


def test_plan_of_a_new_cluster_on_a_retired_size_is_an_error(tmp_path):
    """Through the CLI on the local emulator: the cluster does not exist, so the plan refuses it."""
    path = tmp_path / "stack.yaml"
    path.write_text(STACK, encoding="utf-8")
    env = {**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state")}
    r = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(path), "--local", "--json"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert "Traceback" not in r.stderr
    plan = json.loads(r.stdout)
    retired = [d for d in plan["diagnostics"] if d["rule"] == "cluster.size-retired"]
    assert [(d["severity"], d["line"]) for d in retired] == [("error", 5)], textwrap.shorten(r.stdout, 2000)
    assert r.returncode == 1


@pytest.mark.parametrize("content", ["sizes: [1]\n", "sizes: {Standard_X: 5}\n", "[1, 2]\n",
                                     "nccl_env_profiles: 3\nsizes: {}\n",
                                     "sizes: {Standard_X: {gpus: 1, vcpus: 1, memory_gib: 1, family: f, rdma: false, "
                                     "sriov: false, nccl_over_ib: false, source: s, retired: 2025-13-45}}\n"])
def test_a_hand_broken_catalog_is_a_diagnostic(tmp_path, content):
    validators = _copy_validators(tmp_path)
    (validators / "skus.yaml").write_text(content, encoding="utf-8")
    env = {**os.environ, "INFRA_VALIDATORS_DIR": str(validators), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "stacks/ib-a100.yaml"], capture_output=True,
                       text=True, cwd=ROOT, env=env)
    assert r.returncode == 1 and "knowledge.invalid" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_no_home_directory_means_no_cache_not_a_failure(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "XDG_CACHE_HOME")}
    r = subprocess.run([sys.executable, "-c", "import os, pwd\n"
                        "pwd.getpwuid = lambda uid: (_ for _ in ()).throw(KeyError(uid))\n"
                        "from infra_cli.knowledge.skus import load_catalog\nprint(len(load_catalog().names()))"],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0 and int(r.stdout) > 80, r.stderr


def test_cache_keeps_a_bounded_number_of_catalogs(tmp_path):
    cache = tmp_path / "cache" / "infra"
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for i in range(12):  # twelve users' copies of validators/, as tests make them
        env["INFRA_VALIDATORS_DIR"] = str(_copy_validators(tmp_path / f"copy{i}"))
        _skus_json(env)
    assert 1 <= len(list(cache.glob("skus-*.json"))) <= 8

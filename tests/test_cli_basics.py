"""The offline commands through the real CLI: --help, validate, skus, schema; and what they import."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.knowledge.skus import load_catalog

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "stacks").glob("*.yaml"))
# Heavy or remote-facing modules an offline command must not load (they must start in well under 0.5 s).
FORBIDDEN = re.compile(r"^(azure|torch|jinja2|markupsafe|infra_cli\.emulator\.(?!command$))")


def run_cli(*args: str, importtime: bool = False) -> subprocess.CompletedProcess:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "infra_cli", *args], capture_output=True, text=True,
                          cwd=ROOT)


def imported_modules(importtime_stderr: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", importtime_stderr, re.M)}


@pytest.mark.parametrize("args", [["--help"], ["validate", "stacks/ib-a100.yaml"], ["schema"], ["skus", "--json"],
                                  ["render", "--help"]], ids=" ".join)
def test_offline_commands_import_no_heavy_module(args):
    r = run_cli(*args, importtime=True)
    assert r.returncode == 0, r.stderr[-2000:]
    modules = imported_modules(r.stderr)
    assert "infra_cli.commands.main" in modules  # the parse works: a broken regex must not pass this test
    heavy = sorted(m for m in modules if FORBIDDEN.match(m))
    assert not heavy, f"`infra {' '.join(args)}` imports {heavy[:10]}"


def test_help_lists_the_commands():
    r = run_cli("--help")
    assert r.returncode == 0
    for command in ("validate", "skus", "schema", "render"):
        assert re.search(rf"^\s+{command}\s", r.stdout, re.M), command


def test_version_as_terraform_spells_it_and_shell_completion():
    import tomllib
    from importlib.metadata import version as installed

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # one place names the version: the package's __version__, which the build reads and pip records
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "infra_cli.__version__"}
    version = installed("infra-cli")
    for flag in ("--version", "-version"):
        r = run_cli(flag)
        assert (r.returncode, r.stdout) == (0, f"infra v{version}\n"), r.stderr
    r = run_cli("--show-completion", "bash")
    assert r.returncode == 0 and "_infra_completion" in r.stdout and "complete " in r.stdout
    assert "--install-completion" in run_cli("--help").stdout


def test_no_arguments_shows_help_not_a_traceback():
    r = run_cli()
    assert "Usage" in r.stdout + r.stderr and "Traceback" not in r.stderr


# ---- validate -------------------------------------------------------------------------------------------

def test_example_stacks_validate_clean_in_text_and_json():
    r = run_cli("validate", *map(str, EXAMPLES))
    assert r.returncode == 0, r.stderr
    assert f"{len(EXAMPLES)} stack file(s) valid: 0 error(s), 0 warning(s)" in r.stderr
    r = run_cli("validate", "--json", *map(str, EXAMPLES))
    assert r.returncode == 0 and json.loads(r.stdout)["diagnostics"] == []


def test_warnings_alone_exit_0(tmp_path):
    stack = tmp_path / "warn.yaml"
    stack.write_text((ROOT / "stacks" / "ib-a100.yaml").read_text().replace("process_count_per_instance: 8",
                                                                             "process_count_per_instance: 4"))
    r = run_cli("validate", "--json", str(stack))
    assert r.returncode == 0, r.stderr
    (d,) = json.loads(r.stdout)["diagnostics"]
    assert d == {"severity": "warning", "rule": "distribution.gpus-underused", "message": d["message"],
                 "file": str(stack), "line": 31, "column": 33, "hint": d["hint"]}


# ---- skus -----------------------------------------------------------------------------------------------

def test_skus_json_is_the_whole_catalog():
    r = run_cli("skus", "--json")
    assert r.returncode == 0
    rows = json.loads(r.stdout)
    assert [row["name"] for row in rows] == load_catalog().names()
    nd = next(row for row in rows if row["name"] == "Standard_ND96asr_v4")
    assert (nd["gpus"], nd["infiniband"]["total_gbps"], nd["sriov"], nd["nccl_over_ib"]) == (8, 1600, True, True)
    assert nd["healthy_busbw_gbs"]["single_node"] == 228 and nd["source"]
    assert nd["nccl_env"]["NCCL_TOPO_FILE"] == "/opt/microsoft/ndv4-topo.xml"


def test_skus_json_carries_the_retirement():
    rows = {row["name"]: row for row in json.loads(run_cli("skus", "--json").stdout)}
    ncv3 = rows["Standard_NC24rs_v3"]
    assert (ncv3["retirement_date"], ncv3["retired"]) == ("2025-09-30", True)
    assert ncv3["retirement_source"].startswith("https://learn.microsoft.com/")
    assert (rows["Standard_ND96isr_H100_v5"]["retirement_date"], rows["Standard_ND96isr_H100_v5"]["retired"]) == (None, False)


def test_skus_infiniband_keeps_only_eligible_sizes():
    rows = json.loads(run_cli("skus", "--infiniband", "--json").stdout)
    names = {row["name"] for row in rows}
    assert {"Standard_ND96asr_v4", "Standard_ND96isr_H100_v5", "Standard_HB120rs_v3"} <= names
    assert not names & {"Standard_NC24r", "Standard_H16r", "Standard_NC96ads_A100_v4", "Standard_NC80adis_H100_v5"}
    assert all(row["infiniband_eligible"] for row in rows)


def test_skus_table_shows_the_facts():
    r = run_cli("skus")
    assert r.returncode == 0
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line.startswith("Standard_")}
    assert len(lines) == len(load_catalog().names())
    h100 = lines["Standard_ND96isr_H100_v5"]
    assert "H100 80GB" in h100 and "NDR 8x 400 = 3.2 Tb/s" in h100 and ">= 460" in h100
    assert "RETIRED" in lines["Standard_NC24r"] and "without SR-IOV" in lines["Standard_NC24r"]
    assert "unconfirmed: family" in lines["Standard_ND96isr_H200_v5"]
    header = r.stdout.splitlines()[0]
    for column in ("size", "GPUs", "GPU model", "vCPUs", "InfiniBand", "SR-IOV", "NCCL/IB", "healthy busbw"):
        assert column in header


def test_skus_table_marks_live_availability():
    from infra_cli.commands.views.skus import skus_table

    catalog = load_catalog()
    text = skus_table([catalog.get("Standard_ND96asr_v4"), catalog.get("Standard_NC24r")],
                      {"standard_nd96asr_v4": "available"})
    assert "available" in text.splitlines()[2] and "not offered" in text.splitlines()[3]
    assert skus_table([]) == "no sizes match"


def test_skus_live_in_a_region_that_does_not_exist_is_an_error(tmp_path):
    env = {**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state")}
    r = subprocess.run([sys.executable, "-m", "infra_cli", "skus", "--location", "nowhere", "--local"],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 1 and "error[skus.unknown-location]" in r.stderr and "eastus" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_usage_errors_exit_1_not_the_detailed_exitcode_2():
    """`plan --detailed-exitcode` exits 2 for "changes present": a mistyped option must not read as that."""
    for args in (["plan", "stacks/ib-a100.yaml", "--detailed-exitcode", "--bogus"],
                 ["plan", "stacks/ib-a100.yaml", "--refresh-only", "--destroy"],
                 ["apply", "stacks/ib-a100.yaml", "--parallelism", "0"]):
        r = run_cli(*args)
        assert r.returncode == 1, (args, r.stderr)
        assert "Usage:" in r.stderr and "Traceback" not in r.stderr
    assert "use one of them" in run_cli("plan", "stacks/ib-a100.yaml", "--refresh-only", "--destroy").stderr


# ---- schema ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stack_schema() -> dict:
    r = run_cli("schema")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _objects(schema: dict):
    yield "Stack", schema
    yield from schema["$defs"].items()


def test_schema_is_strict_and_described(stack_schema):
    assert stack_schema["$schema"].startswith("https://json-schema.org/")
    for name, obj in _objects(stack_schema):
        assert obj["additionalProperties"] is False, name
        assert obj.get("title") and obj.get("description"), name
        for field, prop in obj["properties"].items():
            # a field typed by another model refers to it ($ref); that model carries title and description
            assert (prop.get("title") and prop.get("description")) or "$ref" in json.dumps(prop), (name, field)
    assert stack_schema["$defs"]["Cluster"]["properties"]["tier"]["enum"] == ["dedicated", "low_priority"]


def _load_yaml(path: Path):
    import yaml

    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("stack", EXAMPLES + [ROOT / "tests" / "fixtures" / "render" / "full.yaml"],
                         ids=lambda p: p.name)
def test_example_stacks_satisfy_the_schema(stack_schema, stack):
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator(stack_schema).validate(_load_yaml(stack))


@pytest.mark.parametrize("name", ["unknown_key.yaml", "wrong_type.yaml", "missing_key.yaml"])
def test_bad_stacks_fail_the_schema(stack_schema, name):
    jsonschema = pytest.importorskip("jsonschema")
    errors = list(jsonschema.Draft202012Validator(stack_schema).iter_errors(
        _load_yaml(ROOT / "tests" / "fixtures" / "bad_stacks" / name)))
    assert errors


@pytest.mark.parametrize("where, value", [
    (("clusters", "a100", "max_instances"), 0), (("clusters", "a100", "min_instances"), -1),
    (("clusters", "a100", "idle_time_before_scale_down"), 2 ** 31),
    (("distributions", "ddp", "process_count_per_instance"), 0),   # optional fields: the bound is on the branch
    (("distributions", "ddp", "instance_count"), 0),
    (("distributions", "ddp", "smoke", "max_message_bytes"), 0),   # gt: exclusiveMinimum
    (("distributions", "ddp", "smoke", "busbw_fraction"), 1.5),
])
def test_every_bound_is_one_an_editor_enforces(stack_schema, where, value):
    """What an editor's YAML language server does with the schema: jsonschema refuses each value the model
    refuses (pydantic's own ge/le names, left inside optional fields, are ignored by validators)."""
    jsonschema = pytest.importorskip("jsonschema")
    stack = _load_yaml(ROOT / "stacks" / "ib-a100.yaml")
    validator = jsonschema.Draft202012Validator(stack_schema)
    assert not list(validator.iter_errors(stack))
    holder = stack
    for key in where[:-1]:
        holder = holder.setdefault(key, {})
    holder[where[-1]] = value
    errors = list(validator.iter_errors(stack))

    def kinds(errs):
        for e in errs:
            yield e.validator
            yield from kinds(e.context)

    assert {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} & set(kinds(errors)), errors
    assert '"ge"' not in json.dumps(stack_schema) and '"le"' not in json.dumps(stack_schema)


def test_location_without_local_says_it_is_ignored():
    r = run_cli("skus", "--location", "eastus", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)
    assert "warning[skus.location-ignored]" in r.stderr


def test_live_availability_comes_from_the_local_cloud(tmp_path):
    """`skus --location L --local` asks the local emulator (its state in INFRA_LOCAL_DIR, never ./.infra in the
    repository) which sizes L offers: each size gets the emulator's word for it, no traceback."""
    state = tmp_path / "local"
    env = {k: v for k, v in os.environ.items() if k not in ("INFRA_EMULATOR_URL", "AZUREML_CURRENT_CLOUD")}
    env["INFRA_LOCAL_DIR"] = str(state)
    r = subprocess.run([sys.executable, "-m", "infra_cli", "skus", "--location", "eastus", "--local", "--json"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert "Traceback" not in r.stderr
    assert r.returncode == 0, r.stderr
    availability = {row["name"]: row["availability"] for row in json.loads(r.stdout)}
    assert availability["Standard_ND96asr_v4"] == "available" and availability["Standard_H16"] == "not offered"
    assert (state / "state.sqlite3").is_file() and not (tmp_path / ".infra").exists()


@pytest.mark.parametrize("args", [["validate", "stacks/ib-a100.yaml"], ["skus"]], ids=" ".join)
def test_broken_catalog_is_a_diagnostic(tmp_path, args):
    import os
    import shutil

    shutil.copytree(ROOT / "validators", tmp_path / "validators")
    (tmp_path / "validators" / "skus.yaml").write_text("sizes:\n  Standard_X: {gpus: 1}\n")
    r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "INFRA_VALIDATORS_DIR": str(tmp_path / "validators")})
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "error[knowledge.invalid]" in r.stderr and "vcpus" in r.stderr


def test_import_refuses_what_is_not_a_cluster_address_before_touching_azure():
    grammar = "is not an address: an address here is cluster.NAME or environment.NAME"   # stack/addresses.py
    cases = {("nonsense", "x"): f"'nonsense' {grammar}",
             ("smoke.ddp", "x"): f"'smoke.ddp' {grammar}",
             ("environment.nope", "nope"): "environment.nope is not declared in the stack",
             ("cluster.a100", "other"): "import it under its Azure name: declare clusters.other"}
    for (address, name), expected in cases.items():
        r = run_cli("import", address, name, "stacks/ib-a100.yaml", "--local")
        assert r.returncode == 1 and expected in r.stderr, (address, r.stderr)
        assert "Traceback" not in r.stderr

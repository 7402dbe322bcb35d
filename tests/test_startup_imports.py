"""What the offline commands import: start-up time is mostly imports (bench/bench_startup.py), so `infra --help`
and `infra validate` must not pull in the Azure SDKs, torch, jinja2 or the emulator, and --help not even
pydantic. Each command runs in a fresh interpreter, as `python -m infra_cli` would, and reports sys.modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

_RUN_AND_LIST = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["infra", *sys.argv[2:]]
try:
    runpy.run_module("infra_cli", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    status = exc.code
else:
    status = 0
with open(out, "w") as fh:
    json.dump({"status": status, "modules": sorted(sys.modules)}, fh)
"""

# Top-level packages no offline command needs; infra_cli.emulator is the local Azure emulator (a web server).
_NEVER = ("azure", "torch", "jinja2", "infra_cli.emulator")


def _imported(tmp_path: Path, *args: str, env: dict | None = None) -> tuple[int, set[str]]:
    out = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", _RUN_AND_LIST, str(out), *args], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)
    assert out.exists(), done.stderr[-2000:]
    report = json.loads(out.read_text())
    return report["status"], set(report["modules"])


def _under(modules: set[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(package + "."))


@pytest.mark.parametrize("args", [("--help",), ("validate", "stacks/ib-a100.yaml"), ("validate", "--help")])
def test_offline_commands_import_no_sdk(tmp_path, args):
    status, modules = _imported(tmp_path, *args)
    assert status in (0, None), status
    for package in _NEVER:
        assert not _under(modules, package), f"infra {' '.join(args)} imported {_under(modules, package)[:5]}"


def test_help_imports_no_pydantic_nor_yaml(tmp_path):
    # typer 0.29 builds pydantic TypeAdapters only when a command's parameters are parsed, not for --help
    status, modules = _imported(tmp_path, "--help")
    assert status in (0, None)
    assert not _under(modules, "pydantic") and not _under(modules, "yaml"), \
        _under(modules, "pydantic")[:5] + _under(modules, "yaml")[:5]
    assert not _under(modules, "infra_cli.stack") and not _under(modules, "infra_cli.validate")


_LOAD_COUNTING_PLUGIN_SCANS = """
import importlib.metadata as metadata, json, os, sys
scans = []
real = metadata.distributions
metadata.distributions = lambda *a, **k: (scans.append(1), real(*a, **k))[1]
before = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
from infra_cli.stack.load import load_stack
stack = load_stack("stacks/ib-a100.yaml").stack
print(json.dumps({"scans": len(scans), "before": before, "after": os.environ.get("PYDANTIC_DISABLE_PLUGINS"),
                  "clusters": sorted(stack.clusters)}))
"""


@pytest.mark.parametrize("setting", [None, "some_plugin"])
def test_stack_model_skips_pydantic_plugin_discovery(setting):
    # Discovery reads the entry points of every installed distribution (~10 ms); the variable is put back as it was.
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if setting is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = setting
    done = subprocess.run([sys.executable, "-c", _LOAD_COUNTING_PLUGIN_SCANS], cwd=ROOT, capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["scans"] == 0
    assert report["before"] == report["after"] == setting
    assert report["clusters"]

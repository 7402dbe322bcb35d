"""What the offline commands import: start-up time is mostly imports (bench/bench_startup.py), so `infra --help`
and `infra validate` must not pull in the Azure SDKs, torch, jinja2 or the emulator, --help not even pydantic,
and loading a stack no pydantic either. Each command runs in a fresh interpreter, as `python -m infra_cli`
would, and reports sys.modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.azure.clients import EMULATOR_CLOUD_PREFIX

ROOT = Path(__file__).resolve().parent.parent

_RUN_AND_LIST = """
import json, os, sys
out, sys.argv = sys.argv[1], ["infra", *sys.argv[2:]]
try:
    from infra_cli.commands.main import main   # main(): run() would end the process without teardown
    main()
except SystemExit as exc:
    status = exc.code
else:
    status = 0
with open(out, "w") as fh:
    json.dump({"status": status, "modules": sorted(sys.modules), "cloud": os.environ.get("AZUREML_CURRENT_CLOUD")}, fh)
"""

# Top-level packages no offline command needs; infra_cli.emulator is the local Azure emulator (a web server);
# pydantic: neither the stack model (stack/fields.py) nor the command line (commands/params.py) needs it;
# regopy: Rego policies run in plan's child process only (plan/policy_worker.py).
_NEVER = ("azure", "torch", "jinja2", "infra_cli.emulator", "pydantic", "pydantic_core", "regopy")


def _run(tmp_path: Path, *args: str, env: dict | None = None) -> dict:
    out = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", _RUN_AND_LIST, str(out), *args], cwd=ROOT, capture_output=True,
                          text=True, env=_environment(env), timeout=120)
    assert out.exists(), done.stderr[-2000:]
    return json.loads(out.read_text())


def _imported(tmp_path: Path, *args: str, env: dict | None = None) -> tuple[int, set[str]]:
    report = _run(tmp_path, *args, env=env)
    return report["status"], set(report["modules"])


def _environment(changes: dict | None) -> dict:
    """os.environ with `changes` applied; a None value removes the variable."""
    env = dict(os.environ)
    for name, value in (changes or {}).items():
        env.pop(name, None)
        if value is not None:
            env[name] = value
    return env


def _under(modules: set[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(package + "."))


@pytest.mark.parametrize("args", [("--help",), ("validate", "stacks/ib-a100.yaml"), ("validate", "--help"),
                                  ("validate", "--json", "stacks/ib-h100.yaml"), ("schema",), ("skus",), ("rules",),
                                  ("rules", "--json")])
def test_offline_commands_import_no_sdk(tmp_path, args):
    status, modules = _imported(tmp_path, *args)
    assert status in (0, None), status
    for package in _NEVER:
        assert not _under(modules, package), f"infra {' '.join(args)} imported {_under(modules, package)[:5]}"


def test_help_imports_no_yaml_nor_the_stack_model(tmp_path):
    status, modules = _imported(tmp_path, "--help")
    assert status in (0, None)
    assert not _under(modules, "yaml"), _under(modules, "yaml")[:5]
    assert not _under(modules, "infra_cli.stack") and not _under(modules, "infra_cli.validate")


def test_help_and_validate_leave_the_azure_client_module_alone(tmp_path):
    # main() needs infra_cli.azure.clients only to drop an inherited emulator cloud name
    for args in (("--help",), ("validate", "stacks/ib-a100.yaml")):
        status, modules = _imported(tmp_path, *args, env={"AZUREML_CURRENT_CLOUD": None})
        assert status in (0, None)
        assert "infra_cli.azure.clients" not in modules, args


@pytest.mark.parametrize("inherited, kept", [(EMULATOR_CLOUD_PREFIX + "abc", None), ("AzureCloud", "AzureCloud")])
def test_an_inherited_emulator_cloud_is_still_dropped(tmp_path, inherited, kept):
    # another process's emulator cloud would make `import azure.ai.ml` fail; Azure's own clouds stay
    report = _run(tmp_path, "--help", env={"AZUREML_CURRENT_CLOUD": inherited})
    assert report["cloud"] == kept


_LOAD_AND_LIST = """
import importlib.metadata as metadata, json, sys
scans = []
real = metadata.distributions
metadata.distributions = lambda *a, **k: (scans.append(1), real(*a, **k))[1]
import infra_cli.stack.load, infra_cli.validate.engine
stack = infra_cli.stack.load.load_stack("stacks/ib-a100.yaml").stack
print(json.dumps({"scans": len(scans), "modules": sorted(sys.modules), "clusters": sorted(stack.clusters)}))
"""


def test_loading_a_stack_imports_no_pydantic():
    # The stack model is infra_cli/stack/fields.py's (pydantic's import and model build were ~40% of validate's
    # start-up), and nothing reads installed distributions' entry points (~10 ms) to load a stack.
    done = subprocess.run([sys.executable, "-c", _LOAD_AND_LIST], cwd=ROOT, capture_output=True, text=True,
                          env=_environment(None), timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    modules = set(report["modules"])
    assert not _under(modules, "pydantic") and not _under(modules, "pydantic_core"), _under(modules, "pydantic")[:5]
    assert report["scans"] == 0
    assert report["clusters"]


def test_command_modules_keep_their_annotations_as_objects():
    # typer reads the annotations of every command at each start: as text (PEP 563) each is compiled and
    # evaluated first, 10 ms of `infra --help`. A module that defines a command or callback keeps them as objects.
    commands = ROOT / "infra_cli" / "commands"
    defining = [p for p in sorted(commands.glob("*.py"))
                if "\ndef register(app" in p.read_text() or "\n@app.callback" in p.read_text()]
    assert len(defining) == 10, defining   # the nine command groups and root.py
    stringified = [p.name for p in defining if "\nfrom __future__ import annotations" in p.read_text()]
    assert not stringified, stringified

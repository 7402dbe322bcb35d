"""Control characters and values Azure ML refuses (issue 31, "Crashes and wrong messages", "Values Azure refuses,
accepted"): a NUL in `conda_file`, `build.path` or `code` was "internal error: ValueError: embedded null byte";
U+2028, U+0085, ESC and NUL in display_name, tags, environment_variables and command, a newline in a job's
identity type and an shm_size no 64-bit count holds were all "valid". Each is now a diagnostic at its line.

Names, paths, tags and variables are one line of plain text; free text (a command, a description) keeps its
tabs and line breaks, nothing else.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.diagnostics import DiagnosticError
from infra_cli.stack.load import load_stack
from infra_cli.validate.engine import validate_files

ROOT = Path(__file__).resolve().parents[2]
BASE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04"

# Every text field of the attacks, each on a line of its own; VALUE is replaced by a YAML double-quoted string.
FIELDS = {
    "conda_file": ("environments", f"  img:\n    image: {BASE}\n    conda_file: VALUE\n"),
    "build.path": ("environments", "  built:\n    build:\n      path: VALUE\n"),
    "environment tag": ("environments", f"  tagged:\n    image: {BASE}\n    tags:\n      team: VALUE\n"),
    "cluster tag": ("clusters", "  cpu:\n    size: Standard_D4s_v3\n    tags:\n      owner: VALUE\n"),
    "code": ("distributions", "    code: VALUE\n"),
    "display_name": ("distributions", "    display_name: VALUE\n"),
    "job tag": ("distributions", "    tags:\n      run: VALUE\n"),
    "environment_variables": ("distributions", "    environment_variables:\n      NCCL_DEBUG: VALUE\n"),
    "command": ("distributions", "    command: VALUE\n"),
    "experiment_name": ("distributions", "    experiment_name: VALUE\n"),
    "input path": ("distributions", "    inputs:\n      data:\n        path: VALUE\n"),
    "cluster description": ("clusters", "  cpu:\n    size: Standard_D4s_v3\n    description: VALUE\n"),
}
FREE_TEXT = {"command", "cluster description", "input path"}
CONTROLS = {"NUL": "\\0", "ESC": "\\e", "NEL": "\\N", "LINE SEPARATOR": "\\L", "DEL": "\\x7f", "BEL": "\\a"}
LINE_BREAKS = {"newline": "\\n", "tab": "\\t", "carriage return": "\\r"}

HEADER = """stack: ctl
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw-training, location: eastus}
"""


def stack_text(field: str, value: str) -> str:
    section, block = FIELDS[field]
    parts = {"clusters": "  gpu: {size: Standard_ND96asr_v4, max_instances: 2}\n",
             "environments": "  env: {curated: 'azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest'}\n",
             "distributions": "  job:\n    cluster: gpu\n    environment: env\n    type: pytorch\n"
                              "    process_count_per_instance: 8\n"}
    parts[section] += block.replace("VALUE", f'"train{value}x"')
    return HEADER + "".join(f"{name}:\n{body}" for name, body in parts.items())


def diagnostics(tmp_path: Path, text: str) -> list:
    path = tmp_path / "stack.yaml"
    path.write_text(text)
    return validate_files([path])


def line_of(text: str, marker: str = '"train') -> int:
    return text[:text.index(marker)].count("\n") + 1


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("control", sorted(CONTROLS))
def test_a_control_character_in_any_text_is_an_error_at_its_line(tmp_path, field, control):
    text = stack_text(field, CONTROLS[control])
    found = [d for d in diagnostics(tmp_path, text) if d.severity == "error"]
    assert len(found) == 1, found
    d = found[0]
    assert d.rule == "stack.invalid" and "control characters" in d.message and d.line == line_of(text), d
    assert "remove them" in d.hint


@pytest.mark.parametrize("field", sorted(FIELDS))
@pytest.mark.parametrize("brk", sorted(LINE_BREAKS))
def test_line_breaks_and_tabs_only_in_free_text(tmp_path, field, brk):
    text = stack_text(field, LINE_BREAKS[brk])
    refused = [d for d in diagnostics(tmp_path, text) if "control characters" in d.message]
    assert bool(refused) == (field not in FREE_TEXT), refused


def test_a_multi_line_command_stays_valid(tmp_path):
    text = stack_text("command", "").replace('command: "trainx"', "command: >-\n      python train.py\n"
                                            "      --epochs 1\n")
    assert [d for d in diagnostics(tmp_path, text) if d.severity == "error"] == []


@pytest.mark.parametrize("field", ["conda_file", "build.path", "code"])
def test_a_nul_in_a_path_is_a_diagnostic_from_the_cli_never_a_crash(tmp_path, field):
    text = stack_text(field, "\\0")
    (tmp_path / "stack.yaml").write_text(text)
    for command in (["validate", "--json"], ["plan"], ["render", "--out", str(tmp_path / "out")]):
        r = subprocess.run([sys.executable, "-m", "infra_cli", *command[:1], str(tmp_path / "stack.yaml"),
                            *command[1:]], capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert r.returncode == 1, (command, r.stderr)
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert f"stack.yaml:{line_of(text)}:" in r.stderr + r.stdout or json.loads(r.stdout)["diagnostics"][0]["line"] == line_of(text)


@pytest.mark.parametrize("shm, ok", [("2g", True), ("8589934591g", True), ("9223372036854775807", True),
                                     ("8589934592g", False), ("99999999999999999999999g", False),
                                     ("0" * 40 + "1g", True), ("9" * 5000, False)])
def test_shm_size_within_what_docker_reads(tmp_path, shm, ok):
    text = stack_text("display_name", "").replace('display_name: "trainx"', f'resources: {{shm_size: "{shm}"}}')
    found = [d for d in diagnostics(tmp_path, text) if "shm_size" in d.message]
    assert (found == []) == ok, found
    if not ok:
        assert found[0].line == line_of(text, "resources") and "64-bit" in found[0].message
        assert len(found[0].message) < 300   # the value is echoed cut short


def test_a_newline_in_a_jobs_identity_type_is_an_error_at_its_line(tmp_path):
    text = stack_text("display_name", "").replace('display_name: "trainx"', 'identity:\n      type: "managed\\n"')
    found = [d for d in diagnostics(tmp_path, text) if d.severity == "error"]
    assert [(d.rule, d.line) for d in found] == [("distribution.identity-type", line_of(text, "type: \"managed"))]


def test_the_loader_refuses_before_any_rule_touches_the_path(tmp_path):
    text = stack_text("conda_file", "\\0")
    (tmp_path / "stack.yaml").write_text(text)
    with pytest.raises(DiagnosticError) as caught:
        load_stack(tmp_path / "stack.yaml")
    assert "\\x00" in caught.value.diagnostics[0].message


@pytest.mark.parametrize("field", ["conda_file", "build.path", "code"])
@pytest.mark.parametrize("value, words", [("a" * 300, "255 bytes"), ("/".join(["a" * 200] * 21), "4,095 bytes")])
def test_a_path_no_file_system_holds_is_a_diagnostic_at_its_line(tmp_path, field, value, words):
    """It was `error: OSError: File name too long: ...` without the stack's line."""
    text = stack_text(field, "").replace('"trainx"', f'"{value}"')
    found = [d for d in diagnostics(tmp_path, text) if d.severity == "error"]
    assert [(d.rule, d.line) for d in found] == [("stack.invalid", line_of(text, f'"{value[:10]}'))], found
    assert words in found[0].message


def test_a_newline_in_a_jobs_input_name_is_an_error_at_its_line(tmp_path):
    """An input's value may span lines (it is written as JSON); its name may not."""
    text = stack_text("display_name", "").replace('display_name: "trainx"', 'inputs:\n      "x\\ncompute: evil": 1')
    found = [d for d in diagnostics(tmp_path, text) if d.severity == "error"]
    assert [(d.rule, d.line) for d in found] == [("stack.invalid", line_of(text, '"x\\ncompute'))], found

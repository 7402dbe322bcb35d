"""A sensitive variable whose `default:` is the secret itself: the secret is in the stack file, which goes to git.
Warned at the default's line by validate and plan (the value never shown); a default from ${ENV} is not a secret
written in the file, and a plain variable's default is no secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLEAR = "Hunter2-Clear-Pass!"


def _stack(tmp_path: Path, default: str, sensitive: bool = True) -> Path:
    text = (ROOT / "stacks" / "ib-a100.yaml").read_text()
    text = text.replace("stack: ib-a100\n", "stack: ib-a100\nvariables:\n  admin_password:\n    type: string\n"
                        f"    sensitive: {str(sensitive).lower()}\n    default: {json.dumps(default)}\n", 1)
    text = text.replace("    infiniband: required\n", "    infiniband: required\n    ssh_settings:\n"
                        "      admin_username: azureuser\n      admin_password: ${var.admin_password}\n", 1)
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path


def _validate(path: Path, **env: str) -> tuple[int, list[dict], str]:
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(path), "--json"], capture_output=True,
                       text=True, env={**os.environ, **env}, timeout=120)
    return r.returncode, json.loads(r.stdout)["diagnostics"], r.stdout + r.stderr


def test_a_sensitive_default_written_in_the_file_is_warned_at_its_line_without_the_value(tmp_path):
    path = _stack(tmp_path, CLEAR)
    code, diagnostics, out = _validate(path)
    [d] = [d for d in diagnostics if d["rule"] == "variable.sensitive-default"]
    assert code == 0 and d["severity"] == "warning"
    line = path.read_text().splitlines()[d["line"] - 1]
    assert line.strip().startswith("default:"), line
    assert "INFRA_VAR_admin_password" in d["hint"] and "admin_password" in d["message"]
    assert CLEAR not in out


@pytest.mark.parametrize("default, sensitive", [("${ADMIN_PASSWORD_FROM_ENV}", True), ("not-a-secret", False),
                                                ("", True)])
def test_a_default_from_the_environment_a_plain_default_or_none_is_not_warned(tmp_path, default, sensitive):
    _, diagnostics, _ = _validate(_stack(tmp_path, default, sensitive), ADMIN_PASSWORD_FROM_ENV="x-From-Env-1")
    assert "variable.sensitive-default" not in {d["rule"] for d in diagnostics}

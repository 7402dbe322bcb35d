"""Policies that attack the plan that runs them (issue 44): one that loops, one that grows without end, one whose
messages carry terminal escapes or come by the thousand, a policy file that is not text, and limits given as
nonsense. Each is stopped or refused with a message naming what and how to fix it, never a traceback or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from emulator_fixtures import WORKSPACE_YAML

STACK = (f"stack: bounds\n{WORKSPACE_YAML}"
         "clusters:\n  gpu: {size: Standard_NC4as_T4_v3, max_instances: 2, tags: {owner: ml}}\n")

LOOPS = """package main

import rego.v1

deny contains "never" if {
\tsome i in numbers.range(1, 100000)
\tsome j in numbers.range(1, 100000)
\tsome k in numbers.range(1, 100000)
\ti * j * k == -1
}
"""

GROWS = """package main

import rego.v1

deny contains msg if {
\tn := count([i | some i in numbers.range(1, 100000000)])
\tmsg := sprintf("%d", [n])
}
"""

RECURSES = """package main

f(x) := y if { y := f(x) }

deny contains msg if { msg := f(1) }
"""


def plan(tmp_path: Path, policy: str | bytes, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "stack.yaml").write_text(STACK)
    path = tmp_path / "p.rego"
    path.write_bytes(policy if isinstance(policy, bytes) else policy.encode())
    return subprocess.run([sys.executable, "-m", "infra_cli", "plan", "stack.yaml", "--local", "--policy", "p.rego"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          # a generous time bound where a test is not about time: a loaded machine (xdist beside
                          # other work) once took over the default 10 s for 5,000 warnings
                          env={**os.environ, "INFRA_LOCAL_DIR": str(tmp_path / "state"), "INFRA_POLICY_TIMEOUT": "100",
                               **env})


def test_a_policy_that_loops_is_stopped_at_the_time_bound(tmp_path):
    done = plan(tmp_path, LOOPS, INFRA_POLICY_TIMEOUT="2")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "error[policy.timeout]: the policies (p.rego) ran longer than 2s and were stopped" in done.stderr
    assert "INFRA_POLICY_TIMEOUT" in done.stderr


def test_a_policy_that_grows_is_stopped_at_the_memory_bound(tmp_path):
    done = plan(tmp_path, GROWS, INFRA_POLICY_MEMORY_MB="200", INFRA_POLICY_TIMEOUT="60")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "error[policy.memory]: the policies (p.rego) used more than 200 MiB of memory" in done.stderr, done.stderr


def test_a_recursive_policy_is_an_error(tmp_path):
    done = plan(tmp_path, RECURSES)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "p.rego: error[policy.error]: evaluating package main failed: Recursion detected" in done.stderr, done.stderr


def test_messages_cannot_drive_the_terminal_and_are_bounded(tmp_path):
    policy = """package main

import rego.v1

deny contains "\\u001b]0;pwned\\u0007\\u001b[2Jred" if { true }

warn contains sprintf("w%d", [i]) if { some i in numbers.range(1, 5000) }
"""
    done = plan(tmp_path, policy)
    assert done.returncode == 1
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "error[policy.main.deny]:  ]0;pwned  [2Jred" in done.stderr, done.stderr
    assert done.stderr.count("warning[policy.main.warn]") == 999   # MAX_RESULTS, the deny counted


@pytest.mark.parametrize("source, where", [(b"package main\n\ndeny contains \"x\" if { \xff }\n", "p.rego:3:1"),
                                           (b"\x00\x01\x02", "p.rego:1:1")])
def test_a_policy_that_is_not_utf8_text_is_named(tmp_path, source, where):
    done = plan(tmp_path, source)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert where in done.stderr and "error[policy.invalid]" in done.stderr, done.stderr


@pytest.mark.parametrize("name, value", [("INFRA_POLICY_TIMEOUT", "soon"), ("INFRA_POLICY_TIMEOUT", "-1"),
                                         ("INFRA_POLICY_MEMORY_MB", "0"), ("INFRA_POLICY_MEMORY_MB", "1.5")])
def test_limits_that_are_no_positive_number_are_refused_by_name(tmp_path, name, value):
    done = plan(tmp_path, LOOPS, **{name: value})
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"error[policy.limits]: {name}={value!r} is not a positive" in done.stderr, done.stderr

"""The suite on a machine without the Debian packages: a missing program is a skip naming its package, a failure
where CI installed them all (INFRA_REQUIRE_SYSTEM_TOOLS=1)."""

from __future__ import annotations

import pytest

from system_tools import PACKAGES, REQUIRE_ENV, require


def test_a_missing_program_skips_naming_the_apt_get_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))   # nothing on PATH
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        require("mpirun", "skopeo", "dot")
    assert str(skipped.value) == "needs mpirun, skopeo, dot: apt-get install openmpi-bin skopeo graphviz"


def test_under_the_ci_switch_a_missing_program_fails(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=r"INFRA_REQUIRE_SYSTEM_TOOLS=1 but this test needs umoci: "
                                                    r"apt-get install umoci"):
        require("umoci")


def test_a_program_on_path_is_required_silently(monkeypatch, tmp_path):
    program = tmp_path / "umoci"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv(REQUIRE_ENV, "1")
    require("umoci")
    assert PACKAGES["umoci"] == "umoci"


def test_a_program_missing_from_the_table_is_a_mistake_of_the_test():
    with pytest.raises(AssertionError, match="add \\['gcc'\\] to PACKAGES"):
        require("gcc")

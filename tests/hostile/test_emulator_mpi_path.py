"""A job's PATH that puts another Open MPI daemon first (found when the emulator's mpirun took --noprefix and
the node agent looked `orted` up in the job's PATH: the decoy ran and the job failed)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from azure.ai.ml import MpiDistribution, command

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_emulator_jobs import DUMP_ENV, _code, _download, _stream, ready  # noqa: E402,F401


@pytest.mark.system_tools("mpirun")
def test_an_mpi_job_whose_path_puts_another_daemon_first_still_runs_open_mpis_own(ready, tmp_path):
    """A job's PATH (a stack's environment_variables) with a folder holding another `orted` ahead of Open MPI's:
    the ranks see that PATH, and the node's daemon is still mpirun's own (a mismatched daemon fails the job)."""
    decoy = tmp_path / "decoy-bin"
    decoy.mkdir()
    (decoy / "orted").write_text("#!/bin/sh\necho 'decoy orted ran' >&2\nexit 3\n")
    (decoy / "orted").chmod(0o755)
    path = f"{decoy}{os.pathsep}{os.environ['PATH']}"
    job = command(code=str(_code(tmp_path, "env.py", DUMP_ENV)), command="python env.py", environment="runtime:1",
                  compute="cpu", instance_count=2, distribution=MpiDistribution(process_count_per_instance=1),
                  environment_variables={"PATH": path})
    submitted = ready.ml.jobs.create_or_update(job)
    log = _stream(ready, submitted.name)
    assert ready.ml.jobs.get(submitted.name).status == "Completed", log
    artifacts = _download(ready, submitted.name, tmp_path)
    envs = [json.loads((artifacts / "outputs" / f"env_{r}.json").read_text()) for r in range(2)]
    assert [e["PATH"] for e in envs] == [path, path]
    assert "decoy orted ran" not in log

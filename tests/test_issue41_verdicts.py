"""Verdicts infra got wrong on files it can express (issue 41): the processes a per-node launcher started several
times per node really starts, a CPU MPI job's GPU finding, low priority on sizes Azure refuses it for, legacy
curated environments and their did-you-mean, and bindings Azure ML does not bind."""

from __future__ import annotations

from test_validate_rules import A100, CURATED_ENV, check, one_distribution


def test_accelerate_started_per_process_counts_each_copy_s_processes(tmp_path):
    """Under process_count_per_instance 8 Azure ML starts the command 8 times per node; each `accelerate launch
    --num_processes 8` (one machine unless --num_machines says otherwise) starts 8: 64, not 8 x 4 = 32."""
    command = "accelerate launch --num_processes 8 train.py"
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: 2\n"
                                                          f"process_count_per_instance: 8\ncommand: {command}\n"))
    d = r.one("distribution.per-node-launcher", "error", f"command: {command}")
    assert "8 x 8 = 64 processes per node" in d.message, d.message
    # told of the 2 machines, each copy starts 8 / 2 = 4 on its node
    told = "accelerate launch --num_processes 8 --num_machines 2 train.py"
    r = check(tmp_path, one_distribution(A100, CURATED_ENV, f"type: pytorch\ninstance_count: 2\n"
                                                          f"process_count_per_instance: 8\ncommand: {told}\n"))
    assert "8 x 4 = 32 processes per node" in r.one("distribution.per-node-launcher", "error",
                                                   f"command: {told}").message

"""Why a failed smoke job failed, from its logs: signatures (validators/failure_signatures.yaml), grouped
Python exceptions, a log tail as the last resort, and no secret in anything shown."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from infra_cli.knowledge.failure_signatures import signatures
from infra_cli.smoke.diagnose import diagnose, last_exception, redact

# One real-looking line per signature: a signature without a sample here fails the meta-test below.
SAMPLES = {
    "launcher-missing": "/bin/bash: line 1: torchrun: command not found",
    "gloo-interface-missing": "RuntimeError: [enforce fail at third_party/gloo/gloo/transport/tcp/device.cc:84] "
                              "ifa != nullptr. Unable to find address for: ib9",
    "nccl-interface-missing": "node-0:41:41 [0] NCCL INFO Bootstrap : no socket interface found",
    "nccl-ib-no-device": "node-0:41:88 [0] NCCL INFO NET/IB : No device found.",
    # recorded with NCCL 2.28.9 (tests/fixtures/nccl_logs/h200_two_ranks_one_gpu_recorded)
    "nccl-duplicate-gpu": "[2026-11-28 21:42:53] vm:613:613 [0] init.cc:904 NCCL WARN Duplicate GPU detected : "
                          "rank 0 and rank 1 both on CUDA device 60",
    "nccl-ib-verbs-failed": "node-1:52:90 [3] misc/ibvwrap.cc:192 NCCL WARN NET/IB : Call to ibv_reg_mr failed",
    "nccl-watchdog-timeout": "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
                             "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600351 milliseconds before timing out.",
    "cuda-driver-too-old": "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
    "cuda-out-of-memory": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
    "torch-missing": "ModuleNotFoundError: No module named 'torch'",
    "numpy-missing": "infra-preflight: missing numpy: numpy is not importable here (No module named 'numpy' on the "
                     "import path of /usr/bin/python3)",
    "rendezvous-unreachable": "torch.distributed.DistNetworkError: The client socket has timed out while trying "
                              "to connect to (10.0.0.4, 6105).",
    "port-in-use": "RuntimeError: The server socket has failed to listen on any local network address. "
                   "port: 6105, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
    "openmpi-missing": "sh: 1: mpirun: not found",
    "mpi-daemons-unreachable": "ORTE was unable to reliably start one or more daemons.",
    "tensorflow-workers-unreachable": "tensorflow.python.framework.errors_impl.UnavailableError: failed to "
                                      "connect to all addresses",
    "mpirun-refuses-root": "mpirun has detected an attempt to run as root.",
    "mpirun-not-enough-slots": "There are not enough slots available in the system to satisfy the 16",
    "mpirun-rank-died": "mpirun noticed that process rank 7 with PID 7502 on node a100-80-node-0 exited on "
                        "signal 11 (Segmentation fault).",
    "mpirun-rank-failed": "  Process name: [[28804,1],7]",
    "torchrun-child-failed": "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "torchrun-rendezvous-failed": "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
    "deepspeed-aml-socket-ifname": "KeyError: 'NCCL_SOCKET_IFNAME'",
    "deepspeed-aml-master-missing": "KeyError: 'AZ_BATCH_MASTER_NODE'",
    "mpi4py-missing": "ModuleNotFoundError: No module named 'mpi4py'",
    "framework-missing": "lightning is not importable here (ModuleNotFoundError: No module named 'lightning'); "
                         "install lightning in the environment",
    "tensorflow-missing": "tensorflow is not importable here (ModuleNotFoundError: No module named 'tensorflow'); "
                          "install tensorflow in the environment",
    "horovod-missing": "horovod is not importable here (ImportError: libmpi.so.40); install horovod",
    "ray-missing": "infra-preflight: missing ray: ray is not importable here (No module named 'ray' on the import path "
                   "of /usr/bin/python3)",
}


@pytest.mark.parametrize("line, extra", [(SAMPLES["framework-missing"], ".[frameworks]"),
                                         (SAMPLES["tensorflow-missing"], ".[tf]")])
def test_a_missing_framework_names_the_extra_that_brings_it_and_keeps_the_first_cause(line, extra):
    # on the emulator the job ran with infra's own Python: the extra is the fix there, not the image
    [finding] = diagnose({"smoke-result.json": line}, emulated=True)[:1]
    assert f"pip install -e '{extra}'" in finding.fix and "environment's image" in finding.fix
    # with the pip of the Python that ran the jobs (infra's own), not whichever `pip` is first on PATH, and from
    # infra's checkout (where `.` is infra): "pip install -e ... where infra runs" led nowhere from an unactivated
    # venv/bin/infra or another folder
    assert f"{shlex.quote(sys.executable)} -m pip install -e '{extra}' in infra's checkout" in finding.fix, finding.fix
    assert "use a TensorFlow environment" not in finding.fix and "add lightning to" not in finding.fix
    assert "No module named" in finding.cause  # the import's own error, not what a fallback said after it
    # on Azure the environment's image is what lacks it: nothing of infra's own extras
    [finding] = diagnose({"smoke-result.json": line})[:1]
    assert "pip install -e" not in finding.fix and ("add lightning to the environment's image" in finding.fix
                                                     or "use a TensorFlow environment" in finding.fix), finding.fix


# What the smoke job's preflight (templates/smoke/preflight.py.j2) says for each thing a smoke needs, run for real
# with that thing absent: (its arguments, the module hidden, the signature, the install that brings it locally into
# infra's own interpreter: torch as the quick start pins it, the others by the extra that brings them).
PREFLIGHT = [
    (["--module", "torch"], "torch", "torch-missing", "-m pip install torch==2.13.0 numpy"),
    (["--module", "numpy"], "numpy", "numpy-missing", "-m pip install numpy"),
    (["--framework", "deepspeed=deepspeed"], "deepspeed", "framework-missing", "-m pip install -e '.[frameworks]'"),
    (["--framework", "transformers=transformers,accelerate"], "accelerate", "framework-missing",
     "-m pip install -e '.[frameworks]'"),
    (["--framework", "horovod=horovod.torch"], "horovod", "horovod-missing", "-m pip install -e '.[horovod]'"),
    (["--module", "tensorflow"], "tensorflow", "tensorflow-missing", "-m pip install -e '.[tf]'"),
    (["--module", "ray"], "ray", "ray-missing", "-m pip install 'ray[default]'"),
    (["--launcher", "torchrun"], "", "launcher-missing", "-m pip install -e '.[smoke]'"),
]


@pytest.mark.parametrize("args, hidden, signature, extra", PREFLIGHT, ids=[c[2] + "-" + (c[1] or "torchrun") for c in PREFLIGHT])
def test_each_preflight_line_names_what_is_missing_and_the_fix_for_where_the_job_ran(tmp_path, args, hidden,
                                                                                      signature, extra):
    from hidden_modules import without_modules
    from infra_cli.smoke.job_templates import render_smoke_script

    (tmp_path / "preflight.py").write_text(render_smoke_script("preflight.py", "s", "d"))
    env = without_modules(tmp_path / "hide", {"PATH": str(tmp_path / "no-bin")}, hidden)   # no torchrun on PATH
    # the framework's other modules present whatever extras this Python has (preflight only locates them), so
    # exactly `hidden` is missing: accelerate alone, with or without the frameworks extra installed
    framework = args[args.index("--framework") + 1] if "--framework" in args else ""
    for module in framework.partition("=")[2].split(","):
        if module and module.split(".")[0] != hidden:
            package = tmp_path / "hide" / module.split(".")[0]
            package.mkdir(exist_ok=True)
            (package / "__init__.py").touch()
    r = subprocess.run([sys.executable, "preflight.py", *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and r.stderr == "" and r.stdout.count("\n") == 1, r.stdout + r.stderr
    assert r.stdout.startswith(f"infra-preflight: missing {(hidden or 'torchrun') if hidden != 'accelerate' else 'transformers'}: ")
    [local] = diagnose({"user_logs/std_log.txt": r.stdout}, emulated=True)
    assert local.signature == signature and f"{shlex.quote(sys.executable)} {extra}" in local.fix, local.fix
    assert "infra's own Python" in local.fix
    [azure] = diagnose({"user_logs/std_log.txt": r.stdout})
    assert azure.signature == signature and "pip install -e" not in azure.fix and "infra" not in azure.fix


def test_every_signature_has_a_sample_and_compiles():
    ids = [s.id for s in signatures()]
    assert len(ids) == len(set(ids)), "signature ids are unique"
    assert sorted(ids) == sorted(SAMPLES), "each signature needs a sample line in SAMPLES"
    for s in signatures():
        assert s.cause and s.fix and s.source, s.id


@pytest.mark.parametrize("signature", sorted(SAMPLES))
def test_each_sample_is_recognised_by_its_signature(signature):
    findings = diagnose({"user_logs/std_log_process_0.txt": f"starting\n{SAMPLES[signature]}\n"})
    assert findings[0].signature == signature
    assert findings[0].logs == ("user_logs/std_log_process_0.txt",)


def test_groups_are_filled_into_the_cause():
    [finding] = [f for f in diagnose({"a": SAMPLES["gloo-interface-missing"]}) if f.signature]
    assert finding.cause == "GLOO_SOCKET_IFNAME names network interface 'ib9', which the node does not have"


def gloo_traceback(iface: str) -> str:
    return ("Traceback (most recent call last):\n  File \"ddp_smoke.py\", line 300, in main\n"
            "    dist.init_process_group(backend)\n"
            f"RuntimeError: [enforce fail at device.cc:84] ifa != nullptr. Unable to find address for: {iface}\n")


def test_sixteen_ranks_with_one_error_are_one_finding():
    logs = {f"user_logs/std_log_process_{r}.txt": gloo_traceback("ib9") for r in range(16)}
    findings = diagnose(logs)
    assert len(findings) == 1, "the exception line is the signature's line: not repeated as a bare exception"
    assert len(findings[0].logs) == 16
    rendered = "\n".join(findings[0].render())
    assert "seen in user_logs/std_log_process_0.txt (+15 more):" in rendered and "fix: unset GLOO_SOCKET_IFNAME" in rendered


def test_unknown_exceptions_are_grouped_by_their_last_line():
    crash = "Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: bad shape (3, 4)\n"
    other = "Traceback (most recent call last):\n  File \"x.py\", line 9\nKeyError: 'step'\n"
    findings = diagnose({"p0": crash, "p1": crash, "p2": other, "p3": "all fine\n"})
    assert [(f.lines, f.logs) for f in findings] == [(("ValueError: bad shape (3, 4)",), ("p0", "p1")),
                                                     (("KeyError: 'step'",), ("p2",))]
    assert findings[0].cause == "2 of 4 logs end in this Python exception" and findings[0].signature is None


def test_last_exception_reads_the_last_traceback_only():
    text = ("Traceback (most recent call last):\nValueError: first\nretrying\n"
            "Traceback (most recent call last):\n  File \"a.py\", line 2, in f\n    raise X\n"
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970\n")
    assert last_exception(text) == "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970"
    assert last_exception("no traceback here\n") is None


def test_without_any_error_the_first_ranks_tail_is_shown():
    lines = [f"step {i}" for i in range(30)]
    findings = diagnose({"user_logs/std_log_process_1.txt": "other\n",
                         "user_logs/std_log_process_0.txt": "\n".join(lines) + "\nKilled\n"})
    assert len(findings) == 1 and findings[0].logs == ("user_logs/std_log_process_0.txt",)
    assert findings[0].lines[-1] == "Killed" and len(findings[0].lines) == 12
    assert diagnose({}) == []


def test_secrets_never_shown():
    sas = ("https://acct.blob.core.windows.net/c/b?sv=2021-08-06&sr=b&sp=r&sig=AbC%2Bsecret123%3D&se=2026-11-22")
    assert "secret123" not in redact(sas) and "sig=REDACTED" in redact(sas) and "sv=2021-08-06" in redact(sas)
    assert redact("Authorization: Bearer eyJ0eXAiOiJKV1Qi.abc.def") == "Authorization: Bearer REDACTED"
    assert "hunter2" not in redact("AccountKey=hunter2;EndpointSuffix=core.windows.net")
    assert "hunter2" not in redact("password=hunter2 user=me")
    log = f"Traceback (most recent call last):\nOSError: cannot fetch {sas}\n"
    shown = "\n".join(line for f in diagnose({"p0": log}) for line in f.render())
    assert "secret123" not in shown and "sig=REDACTED" in shown


def test_long_lines_are_shortened():
    [finding] = diagnose({"p0": "Traceback (most recent call last):\nValueError: " + "x" * 5000 + "\n"})
    assert len(finding.lines[0]) == 300 and finding.lines[0].endswith("…")


def test_an_empty_first_rank_log_gives_way_to_the_launchers_log():
    findings = diagnose({"user_logs/std_log_process_0.txt": "", "system_logs/mpirun.txt": "launcher said this\n",
                         "user_logs/std_log_process_1.txt": "rank 1 said that\n"})
    assert [f.logs for f in findings] == [("system_logs/mpirun.txt",)]
    assert findings[0].lines == ("launcher said this",) and "system_logs/mpirun.txt" in findings[0].cause


@pytest.mark.system_tools("mpirun")
@pytest.mark.skipif(os.geteuid() != 0, reason="runs mpirun as root, as Azure ML does")
def test_a_real_mpirun_refusing_root_is_a_finding_with_its_fix():
    # What Azure ML's root user meets when the job starts mpirun itself without --allow-run-as-root.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_ALLOW_RUN_AS_ROOT")}
    refused = subprocess.run(["mpirun", "-np", "1", "true"], env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    findings = diagnose({"user_logs/std_log_process_0.txt": "", "system_logs/mpirun.txt": refused.stdout + refused.stderr})
    assert findings[0].signature == "mpirun-refuses-root" and findings[0].logs == ("system_logs/mpirun.txt",)
    assert "--allow-run-as-root" in findings[0].fix and "root" in findings[0].cause

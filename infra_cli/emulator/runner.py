"""Runs submitted command jobs on this machine, as Azure ML would run them on a cluster.

A job's code comes from the blob its code version points at; each emulated node gets a fresh working
directory with a copy of it. Processes are launched as launch.py plans them, with `python` meaning the
emulator's interpreter. Their logs are written straight into the workspace's artifact store
(ExperimentRun/dcid.JOB/user_logs/...), so run history and `jobs.stream` read them while the job runs;
each node's outputs/ folder is collected there when the job ends.

Several emulators may share one state directory (every `--local` command starts its own): a job records
the process that runs it (pid and start time), and a starting emulator fails only jobs whose runner
process is gone, never those another live process is running. A cancel from any of them reaches the
runner through the job's status.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import unquote, urlsplit

from infra_cli.conventions import EMULATED_NODE_VARIABLE, OUTPUTS_LEFT_OUT_LOG
from infra_cli.emulator.service import EmulatedService, Scope
from infra_cli.emulator.blobs import ACCOUNT, BlobError
from infra_cli.emulator.launch import (AZUREML_MASTER_PORT, JobSpec, Launch, find_mpirun, free_port, node_dir,
                                      plan_launches)
from infra_cli.emulator.ml_workspace import artifact_container
from infra_cli.emulator.reaper import forget_group, guarded
from infra_cli.emulator.wire import utc_now_iso
from infra_cli.private_state import private_subdir, refuse_link, write_private_beneath, write_private_file
from infra_cli.safe_files import open_beneath

TERMINAL = frozenset({"Completed", "Failed", "Canceled"})
_POLL_S = 0.5
# AZUREML_CURRENT_CLOUD: set by MLClient in the parent, crashes azure.ai.ml in children. OMPI_ALLOW_RUN_AS_ROOT*:
# Azure ML sets neither in a job (its own mpirun passes --allow-run-as-root, as the emulator's does), so an
# mpirun the job starts itself as root is refused here as it would be there.
_STRIPPED_ENV = ("AZUREML_CURRENT_CLOUD", "OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")


def job_prefix(name: str) -> str:
    return f"ExperimentRun/dcid.{name}/"


def process_start_time(pid: int) -> str | None:
    """When the process started (clock ticks since boot, /proc/PID/stat field 22); None if it is gone.
    A pid alone could have been reused by another process since."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count fields after its closing one.
    return stat.rsplit(")", 1)[-1].split()[19]


def runner_identity() -> dict:
    """This process, as the runner of the jobs it accepts (recorded on each job)."""
    return {"pid": os.getpid(), "start": process_start_time(os.getpid())}


def runner_alive(identity: dict | None) -> bool:
    if not identity or not identity.get("pid"):
        return False
    start = process_start_time(int(identity["pid"]))
    return start is not None and start == identity.get("start")


def environment_scripts() -> list[str]:
    """The console-script folders of the Python environment the jobs run in (this interpreter's): its own
    (a venv's bin/), then the base installation's when the venv sees the base's packages
    (--system-site-packages), since those packages' scripts (torchrun...) live there."""
    folders = [sysconfig.get_path("scripts")]
    if sys.prefix != sys.base_prefix:
        base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
        if sysconfig.get_path("purelib", vars=base) in sys.path:
            folders.append(sysconfig.get_path("scripts", vars=base))
    return folders


class MasterPortLease:
    """The rendezvous port of one job: Azure ML's 6105 when no other job on this machine holds it, else a
    free port. Each Azure ML job has its own master node, so 6105 never clashes there; here every job's
    rank 0 shares one machine (and torch's TCPStore listens on all addresses), so concurrent jobs of any
    emulator on the machine, whoever runs it, take turns through a lock file beside other temporary files."""

    def __init__(self) -> None:
        self.port = AZUREML_MASTER_PORT
        self._fd: int | None = None
        path = os.path.join(tempfile.gettempdir(), f"infra-emulator-master-port-{AZUREML_MASTER_PORT}.lock")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError:
            fd = None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _port_free(AZUREML_MASTER_PORT):
                    self._fd = fd
                    return
            except OSError:
                pass
            os.close(fd)
        self.port = free_port()

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)     # closing drops the lock
            self._fd = None


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # as a listener would: TIME_WAIT is no clash
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


class JobRunner:
    def __init__(self, service: EmulatedService):
        self._service = service
        self._lock = threading.Lock()
        self._running: dict[tuple[str, str], list[subprocess.Popen]] = {}
        self._canceled: set[tuple[str, str]] = set()
        self._threads: list[threading.Thread] = []
        self._shim = self._python_shim()
        # what of a job's outputs/ is uploaded: each file, and all of them (tests set smaller bounds)
        self.max_output_file_bytes, self.max_output_bytes = MAX_OUTPUT_FILE_BYTES, MAX_OUTPUT_BYTES

    def recover(self) -> None:
        """Jobs whose runner process is gone (an emulator that stopped) cannot be resumed: mark them Failed.
        Jobs another live emulator process runs are left to it."""
        for row in self._service.store.rows("job"):
            if row.body["properties"].get("status") in TERMINAL:
                continue
            if runner_alive((row.body.get("_private") or {}).get("runner")):
                continue
            scope = Scope(*row.scope.split("/"))
            self._set_status(scope, row.name, "Failed", error={
                "code": "ServiceError", "message": "The emulator stopped while this job ran; submit it again."})

    def submit(self, scope: Scope, name: str) -> None:
        thread = threading.Thread(target=self._run, args=(scope, name), name=f"job-{name}", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def cancel(self, scope: Scope, name: str) -> None:
        key = (scope.key, name.lower())
        with self._lock:
            self._canceled.add(key)
            procs = list(self._running.get(key, []))
        for proc in procs:
            _kill_group(proc)

    def stop(self) -> None:
        with self._lock:
            procs = [p for group in self._running.values() for p in group]
            threads = list(self._threads)
        for proc in procs:
            _kill_group(proc)
        for thread in threads:
            thread.join(timeout=10)

    # one job
    def _run(self, scope: Scope, name: str) -> None:
        key = (scope.key, name.lower())
        leases: list[MasterPortLease] = []
        scratch: list[Path] = []
        try:
            self._set_status(scope, name, "Starting")
            body = self._service.store.get("job", scope.key, name)
            if body is None:        # deleted before it started: nothing left to run or to mark
                return
            spec = JobSpec.from_body(body["name"], body)
            workspace = self._service.workspace(scope)
            container = artifact_container(workspace)
            prefix = job_prefix(body["name"])
            logs_dir = self._service.blobs.path(container, prefix + "user_logs/x").parent.parent
            jobs = private_subdir(self._service.state_dir, "jobs")
            workdir = jobs / scope.key.replace("/", "_") / body["name"]
            refuse_link(workdir.parent)     # rmtree below would follow a link at the workspace's folder: the job fails
            shutil.rmtree(workdir, ignore_errors=True)
            code_files = self._code_files(scope, body)
            for node in range(spec.instance_count):
                target = node_dir(workdir, node)
                for rel, data in code_files:    # through no link planted in the state directory
                    write_private_beneath(jobs, target / rel, data, 0o600)
                (target / "outputs").mkdir(parents=True, exist_ok=True)
            port = MasterPortLease()
            leases.append(port)
            launches = plan_launches(spec, workdir, logs_dir, mpirun=find_mpirun(), master_port=port.port)
            scratch += [path for launch in launches for path in launch.scratch]
            for launch in launches:
                for path, text, mode in launch.files:
                    write_private_beneath(jobs, path, text.encode("utf-8"), mode)
                for log in (launch.log, *launch.rank_logs):
                    self._service.blobs.register(container, prefix + log, content_type="text/plain")
            with self._lock:
                if key in self._canceled:
                    raise _Canceled()
            self._set_status(scope, name, "Running")
            codes = self._launch_and_wait(scope, key, launches, logs_dir, self._base_env(scope, body, spec))
            with self._lock:
                if key in self._canceled:
                    raise _Canceled()
            self._set_status(scope, name, "Finalizing")
            self._collect_outputs(workdir, spec.instance_count, container, prefix)
            failed = [(launch, code) for launch, code in zip(launches, codes) if code != 0]
            if failed:
                launch, code = failed[0]
                self._set_status(scope, name, "Failed", error={
                    "code": "UserError",
                    "message": f"Execution failed: process writing {launch.log} exited with code {code}. "
                               f"See {launch.log} in the job's logs."})
            else:
                self._set_status(scope, name, "Completed")
        except _Canceled:
            self._set_status(scope, name, "Canceled")
        except Exception as exc:  # noqa: BLE001 - any failure of the emulated service fails the job, visibly
            self._set_status(scope, name, "Failed", error={"code": "ServiceError",
                                                           "message": f"{type(exc).__name__}: {exc}"})
        finally:
            for lease in leases:
                lease.release()
            for path in scratch:
                shutil.rmtree(path, ignore_errors=True)
            with self._lock:
                self._running.pop(key, None)
                self._canceled.discard(key)

    def _launch_and_wait(self, scope: Scope, key: tuple[str, str], launches: list[Launch], logs_dir: Path,
                         base_env: dict[str, str]) -> list[int]:
        procs = []
        try:
            for launch in launches:
                blobs = self._service.blobs.root     # the log is a blob: reached through no link below the store
                fd = open_beneath(blobs, (logs_dir / launch.log).relative_to(blobs).as_posix(),
                                  os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600, make_dirs=True)
                with os.fdopen(fd, "ab") as log:
                    # the job registers its group with the reaper: killed if this process dies, even by SIGKILL
                    argv, reaper_fds = guarded(launch.argv)
                    procs.append(subprocess.Popen(
                        argv, cwd=launch.cwd, env={**base_env, **launch.env}, stdout=log,
                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                        pass_fds=reaper_fds))
                with self._lock:
                    self._running[key] = list(procs)
        except OSError:
            for proc in procs:
                _kill_group(proc)
                forget_group(proc.pid)
            raise
        while any(proc.poll() is None for proc in procs):
            time.sleep(_POLL_S)
            # A cancel accepted by another emulator process over the same state reaches this runner here.
            current = self._service.store.get("job", scope.key, key[1]) or {}
            if current.get("properties", {}).get("status") == "CancelRequested":
                self.cancel(scope, key[1])
        codes = [proc.wait() for proc in procs]
        for proc in procs:
            forget_group(proc.pid)
        return codes

    def _base_env(self, scope: Scope, body: dict, spec: JobSpec) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _STRIPPED_ENV}
        experiment = body["properties"].get("experimentName") or "Default"
        # As on Azure ML, where the job runs inside its environment's Python: that interpreter's scripts folder
        # (a venv's bin/: torchrun, deepspeed, accelerate) comes first, also when infra runs from a venv that is
        # not activated (venv/bin/infra apply ...)
        env["PATH"] = os.pathsep.join([str(self._shim), *environment_scripts(), env.get("PATH", "")])
        env.update({
            "PYTHONUNBUFFERED": "1", "AZUREML_RUN_ID": body["name"],
            "AZUREML_EXPERIMENT_NAME": experiment,
            # Azure ML sets it on every job; DeepSpeed reads its presence as "on Azure ML" and takes its ranks
            # from the OMPI_COMM_WORLD_* variables under MPI (deepspeed.comm.comm.in_aml).
            "AZUREML_EXPERIMENT_ID": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{scope.arm_id}/experiments/{experiment}")),
            "AZUREML_ARM_SUBSCRIPTION": scope.subscription, "AZUREML_ARM_RESOURCEGROUP": scope.resource_group,
            "AZUREML_ARM_WORKSPACE_NAME": scope.workspace, "AZUREML_CR_NODE_COUNT": str(spec.instance_count),
            EMULATED_NODE_VARIABLE: "1",
        })
        env.update(spec.environment_variables)
        return env

    def _python_shim(self) -> Path:
        """A bin/ folder whose `python` and `python3` run the emulator's own interpreter."""
        shim = private_subdir(self._service.state_dir, "bin")
        text = f'#!/bin/sh\nexec "{sys.executable}" "$@"\n'.encode()
        for name in ("python", "python3"):
            path = shim / name
            try:
                info = os.lstat(path)
                kept = stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o755 and path.read_bytes() == text
            except FileNotFoundError:
                kept = False
            if not kept:
                write_private_file(path, text, 0o755)   # a link there is replaced, never written through
        return shim

    def _code_files(self, scope: Scope, body: dict) -> list[tuple[Path, bytes]]:
        code_id = body["properties"].get("codeId")
        if not code_id:
            return []
        parts = code_id.rstrip("/").split("/")
        version_body = self._service.store.get("code_version", scope.key, parts[-3], parts[-1])
        if version_body is None:
            raise RuntimeError(f"code {parts[-3]}:{parts[-1]} is not registered")
        path = unquote(urlsplit(version_body["properties"]["codeUri"]).path).lstrip("/")
        account, _, rest = path.partition("/")
        if account != ACCOUNT:
            raise RuntimeError(f"the code's URI {version_body['properties']['codeUri']} is not in the emulator's storage")
        container, _, prefix = rest.partition("/")
        prefix = prefix.rstrip("/")
        files = []
        for name in self._service.blobs.names(container, prefix):
            rel = name[len(prefix):].lstrip("/") if prefix else name
            if not rel:     # the code URI names a single file
                rel = name.rsplit("/", 1)[-1]
            files.append((Path(rel), self._service.blobs.read(container, name) or b""))
        return files

    def _collect_outputs(self, workdir: Path, nodes: int, container: str, prefix: str) -> None:
        """Each node's outputs/ uploaded as the job's outputs: regular files only, reached through no link (a link
        to /etc/passwd or to a file of gigabytes is never followed: the node is this machine), each at most
        max_output_file_bytes and all at most max_output_bytes, read in one bounded read. What is left out is
        said, one line each, in the job's OUTPUTS_LEFT_OUT_LOG."""
        left_out: list[str] = []
        total = 0
        for node in range(nodes):
            outputs = node_dir(workdir, node) / "outputs"
            for rel, why, data in _output_files(outputs, self.max_output_file_bytes):
                if data is not None and total + len(data) > self.max_output_bytes:
                    why, data = f"the job's outputs are past {_mib(self.max_output_bytes)} in all", None
                if data is not None:
                    try:
                        self._service.blobs.write(container, f"{prefix}outputs/{rel}", data)
                        total += len(data)
                        continue
                    except BlobError as exc:
                        why = exc.message
                left_out.append(f"outputs/{_shown(rel)} (node {node}): {_shown(why)}: not uploaded")
        if left_out:
            self._service.blobs.write(container, prefix + OUTPUTS_LEFT_OUT_LOG, "".join(
                f"{line}\n" for line in left_out).encode("utf-8"), content_type="text/plain")

    def _set_status(self, scope: Scope, name: str, status: str, error: dict | None = None) -> None:
        store = self._service.store
        with store.lock:
            body = store.get("job", scope.key, name)
            if body is None:
                return
            # Statuses only move forward: a cancel accepted while the job was starting must not be hidden by
            # the runner's next step (Starting, Running, Finalizing), and an ended job stays ended.
            current = body["properties"].get("status")
            if current in TERMINAL or (current == "CancelRequested" and status not in TERMINAL):
                return
            private = dict(body.get("_private") or {})
            now = utc_now_iso()
            if status == "Running":
                private["startTimeUtc"] = now
            if status in TERMINAL:
                private["endTimeUtc"] = now
            if error:
                private["error"] = error
            body["_private"] = private
            body["properties"]["status"] = status
            store.put("job", scope.key, name, body)


class _Canceled(Exception):
    pass


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# What the emulator uploads of a job's outputs/: the node is this machine, so what a job leaves there is read here
MAX_OUTPUT_FILE_BYTES = 64 << 20
MAX_OUTPUT_BYTES = 256 << 20


def _shown(text: str) -> str:
    """A name a job chose, on one line of a log: as ascii() writes it when it holds a line break or escape code."""
    return text if text.isprintable() else ascii(text)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def _output_files(outputs: Path, cap: int):
    """(relative name, why it is left out or None, its bytes or None) for each entry below `outputs`, walked
    without following a link; a regular file is opened through no link (open_beneath) and read at most `cap`."""
    try:
        info = os.lstat(outputs)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):   # the job replaced the folder itself (by a link to /home, say)
        yield "", (f"a symbolic link (to {os.readlink(outputs)}): links are never followed"
                   if stat.S_ISLNK(info.st_mode) else "not a folder"), None
        return
    for folder, dirs, files in os.walk(outputs):   # followlinks=False: a linked folder is listed, never entered
        base = Path(folder)
        for name in sorted(dirs + files):
            path = base / name
            rel = path.relative_to(outputs).as_posix()
            info = os.lstat(path)
            if stat.S_ISDIR(info.st_mode):
                continue
            if stat.S_ISLNK(info.st_mode):
                yield rel, f"a symbolic link (to {os.readlink(path)}): links are never followed", None
                continue
            if not stat.S_ISREG(info.st_mode):
                yield rel, "not a regular file", None
                continue
            try:
                fd = open_beneath(outputs, rel, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            except OSError as exc:   # a link swapped in since: never followed
                yield rel, f"not opened without following a link ({exc.strerror})", None
                continue
            with os.fdopen(fd, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                    yield rel, "not a regular file", None
                elif size > cap:
                    yield rel, f"{size} bytes, over the {_mib(cap)} a file of a job's outputs may be here", None
                else:
                    data = fh.read(cap + 1)
                    yield (rel, None, data) if len(data) <= cap else (rel, f"grew past {_mib(cap)}", None)

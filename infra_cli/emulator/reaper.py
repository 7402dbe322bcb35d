"""A reaper for the emulator's job processes: when the process that runs the emulator dies, however it dies
(SIGKILL included, where no handler or atexit runs), the jobs it started die too.

Each job runs in its own process group (a new session), so one signal reaches the launcher and every rank it
started (mpirun's included). A small watcher process holds the read end of a pipe whose write end only this
process has; the runner tells it which groups are live ("+PGID", "-PGID" lines). The kernel closes the write
end when this process ends, the watcher reads end-of-file and kills the groups still registered.

Why not PR_SET_PDEATHSIG: it fires when the parent *thread* exits (jobs are started from short-lived runner
threads) and reaches only the direct child, not the ranks mpirun starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

# Runs in the watcher: standard library only, no infra_cli import (the watcher must start fast and never fail).
_WATCHER = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)   # a Ctrl-C to the terminal's group is for the CLI to handle
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only end-of-file ends it: the groups must be killed first
groups = set()
for line in sys.stdin:
    try:
        pgid = int(line[1:])
    except ValueError:
        continue
    if line.startswith("+"):
        groups.add(pgid)
    else:
        groups.discard(pgid)
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""

_lock = threading.Lock()
_watcher: subprocess.Popen | None = None
_write_fd: int | None = None
_owner_pid: int | None = None


def _pipe() -> int:
    """The write end of the watcher's pipe, starting the watcher on first use (or in a forked child)."""
    global _watcher, _write_fd, _owner_pid
    with _lock:
        if _write_fd is None or _owner_pid != os.getpid():
            read_fd, write_fd = os.pipe()  # not inherited by jobs unless passed (close_fds, O_CLOEXEC)
            try:
                _watcher = subprocess.Popen([sys.executable, "-I", "-c", _WATCHER], stdin=read_fd,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            start_new_session=True, close_fds=True)
            finally:
                os.close(read_fd)
            _write_fd, _owner_pid = write_fd, os.getpid()
        return _write_fd


def _send(line: str) -> None:
    try:
        os.write(_pipe(), line.encode())
    except OSError:  # the watcher is gone (killed by hand): the jobs still run, only unguarded
        pass


# Runs as the job's first program, then becomes the job: registers the group, drops the pipe, restores the
# signals Python ignores (an exec keeps ignored signals ignored), execs the command (PATH as the job's).
_REGISTER = """
import os, signal, sys
fd = int(sys.argv[1])
try:
    os.write(fd, b"+%d\\n" % os.getpgid(0))
except OSError:
    pass
os.close(fd)
for name in ("SIGPIPE", "SIGXFSZ"):
    if hasattr(signal, name):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:  # as a shell says it: the command, why, exit 127
    sys.stderr.write("%s: %s\\n" % (sys.argv[2], exc.strerror or exc))
    sys.exit(127)
"""


def guarded(argv: list[str]) -> tuple[list[str], tuple[int, ...]]:
    """`argv` wrapped so the job registers its own process group with the watcher before it runs: no window
    between fork and registration in which a SIGKILL of this process would leave it unguarded. Start it with
    start_new_session=True and pass_fds=the returned fds. The wrapper closes the pipe before exec, so the
    job never holds it open (the watcher's end-of-file means this process is gone)."""
    fd = _pipe()
    return [sys.executable, "-I", "-c", _REGISTER, str(fd), *argv], (fd,)


def forget_group(pgid: int) -> None:
    """The group has ended (its leader was waited for): its id may be reused, so stop guarding it."""
    _send(f"-{pgid}\n")

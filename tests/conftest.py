import compileall
import os
import re
import signal
from pathlib import Path

import pytest

# Where PYTHONDONTWRITEBYTECODE is set (this project's CI machines set it), Python never caches infra_cli's
# bytecode, and each of the suite's thousands of `python -m infra_cli` processes compiled its ~90 modules
# again: a third of the CPU of a `plan --local`. Python still reads an up-to-date cache under that
# setting, so the package is compiled once here (each worker finds it done; writes are atomic).
compileall.compile_dir(Path(__file__).resolve().parent.parent / "infra_cli", quiet=2)

# A shell that starts the suite in the background (`pytest ... &` in a script) leaves SIGINT ignored, and an
# ignored signal stays ignored across exec: the tests' Ctrl-C of an infra process would then be lost and the test
# hang. Handled here, the infra processes the tests start get the default disposition back, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)



def _temp_dir_outside_any_project() -> None:
    """An `.infra/` above the temporary directory (a user who ran `infra apply --local` in /tmp) makes every test's
    stack part of that project (paths.py: the nearest folder holding `.infra/` or `.git`), so --local tests share
    its cloud and tests of a stack's own project fail. Then the tests' temporary files go to a folder with none
    above it, for this process and the ones it starts."""
    import tempfile

    def in_a_project(folder: Path) -> bool:
        return any((d / ".infra").is_dir() for d in (folder, *folder.parents))

    if not in_a_project(Path(tempfile.gettempdir()).resolve()):
        return
    for base in ("/var/tmp", "/dev/shm", str(Path.home())):
        if Path(base).is_dir() and os.access(base, os.W_OK) and not in_a_project(Path(base).resolve()):
            # short (Open MPI's session directory must stay under its path limit: tests/test_emulator_jobs.py) and
            # open as /tmp is (a test runs infra as another user: tests/test_smoke_frameworks.py)
            folder = tempfile.mkdtemp(prefix="it", dir=base)
            os.chmod(folder, 0o1777)
            tempfile.tempdir = os.environ["TMPDIR"] = folder
            return


_temp_dir_outside_any_project()

# Open MPI refuses to run as root without these; tests launch a real mpirun.
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

# Fixtures every test may ask for by name: the local Azure emulator with real SDK clients on it
# (emulator_fixtures.py), and a real registry with real images (image_fixtures.py, built on first use).
from emulator_fixtures import clients, emulator, test_workspace  # noqa: E402,F401
from image_fixtures import images, registry  # noqa: E402,F401
from system_tools import require  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "runs_jobs: runs jobs on the emulator (a minute or more); scheduled first")
    config.addinivalue_line("markers", "system_tools(*programs): needs these programs of Debian packages "
                                       "(tests/system_tools.py): skipped naming the package where absent")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("system_tools"):
        require(*mark.args)


EXTRA_SKIP = re.compile(r"pip install -e '\.\[(\w+)\]'")


def pytest_runtest_logreport(report):
    """.ci/run runs the suite in the quick-start venv (no tf or frameworks extra), then again the files of the tests
    that skipped for an extra, with every extra installed: INFRA_EXTRA_SKIPS_FILE gets one `FILE [EXTRA]` line per
    such test (the test's own file: a skip raised in a shared helper reports the helper's file)."""
    listed = os.environ.get("INFRA_EXTRA_SKIPS_FILE")
    if not (listed and report.skipped and isinstance(report.longrepr, tuple)):
        return
    extra = EXTRA_SKIP.search(str(report.longrepr[2]))
    if extra:
        with open(listed, "a") as out:
            out.write(f"{report.nodeid.split('::')[0]} [{extra.group(1)}]\n")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (its worker's hook, --dist loadgroup)
def pytest_collection_modifyitems(config, items):
    """Tests that share a module-scoped fixture (one emulator, one applied stack) run on one xdist worker, in the
    file's order: spread over workers, each worker would build the fixture again and an order the file relies on
    (the one apply that succeeds runs last) would not hold."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        if any(d.scope == "module" for group in defs for d in group):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    # Tests that run emulator jobs take up to minutes each: first in the order, they run beside the thousands of
    # short tests instead of trailing behind them (every worker sorts alike, so xdist's order holds).
    items.sort(key=lambda item: item.get_closest_marker("runs_jobs") is None)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker sends the collected ids
def pytest_collection_finish(session):
    """--dist loadgroup: pytest-xdist 3.8 marks a test's group by renaming `item._nodeid` to `ID@GROUP`, which
    pytest 9.2 no longer reads (a node's id is `item._id`): every group was spread over the workers, each building
    the module's fixtures again (an installed wheel, an emulator). Where the id lacks the group, give it here,
    before the worker reports the ids it collected (its own pytest_collection_finish)."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    for item in session.items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None and "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = coerce_node_id(f"{item.nodeid}@{mark.args[0] if mark.args else mark.kwargs.get('name', 'default')}")

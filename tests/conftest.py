import os

import pytest

# Open MPI refuses to run as root without these; tests launch a real mpirun.
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

# Fixtures every test may ask for by name: the local Azure emulator with real SDK clients on it
# (emulator_fixtures.py), and a real registry with real images (image_fixtures.py, built on first use).
from emulator_fixtures import clients, emulator, test_workspace  # noqa: E402,F401
from image_fixtures import images, registry  # noqa: E402,F401


def pytest_configure(config):
    config.addinivalue_line("markers", "runs_jobs: runs jobs on the emulator (a minute or more); scheduled first")


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

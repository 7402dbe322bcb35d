import os

# Open MPI refuses to run as root without these; tests launch a real mpirun.
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

# Fixtures every test may ask for by name: the local Azure emulator with real SDK clients on it
# (emulator_fixtures.py), and a real registry with real images (image_fixtures.py, built on first use).
from emulator_fixtures import clients, emulator, test_workspace  # noqa: E402,F401
from image_fixtures import images, registry  # noqa: E402,F401

"""Where the project's data lives: the knowledge in validators/ and the Jinja2 templates in templates/.

Both sit beside the package (the design card fixes the top-level layout); INFRA_VALIDATORS_DIR and
INFRA_TEMPLATES_DIR point elsewhere, e.g. at a user's extended catalog.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def validators_dir() -> Path:
    return Path(os.environ.get("INFRA_VALIDATORS_DIR") or PROJECT_ROOT / "validators")


def templates_dir() -> Path:
    return Path(os.environ.get("INFRA_TEMPLATES_DIR") or PROJECT_ROOT / "templates")


def local_state_dir() -> Path:
    """Where `--local` keeps the emulated cloud (DESIGN.md: ./.infra/local/ or INFRA_LOCAL_DIR)."""
    return Path(os.environ.get("INFRA_LOCAL_DIR") or Path.cwd() / ".infra" / "local")

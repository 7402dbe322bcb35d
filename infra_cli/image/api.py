"""What another engine may use of image/: a Dockerfile rendered from a template, and an image's check.

Everything else in image/ is image's own business (tests/test_import_graph.py). Loading this module loads no
registry client: `check_image` loads image.check (ssl, http.client, the layer readers) on its first call, which
only `infra plan --check-images` makes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra_cli.image.dockerfile import render_dockerfile

if TYPE_CHECKING:
    from infra_cli.image.check import CheckResult

__all__ = ["render_dockerfile", "check_image"]


def check_image(reference: str, requirements: list | None = None, **options) -> "CheckResult":
    """infra_cli.image.check.check_image (same arguments)."""
    from infra_cli.image.check import check_image as check

    return check(reference, requirements, **options)

"""`infra plan --check-images`: prove each custom image meets its environment's `requires:` before apply.

Reads the images' layers (image's check_image, no Docker daemon), concurrently; an unmet requirement or an
unreadable image is an error at the environment's `image:` line.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.image.api import check_image
from infra_cli.stack.load import LoadedStack

MAX_IMAGES_AT_ONCE = 4


def _check_one(loaded: LoadedStack, name: str) -> list[Diagnostic]:
    env = loaded.stack.environments[name]
    path = ("environments", name, "image")
    try:
        result = check_image(env.image, list(env.requires))
    except DiagnosticError as exc:
        why = "; ".join(d.message for d in exc.diagnostics)
        return [loaded.source.diagnostic(path, "plan.image-unreadable", f"image {env.image} could not be read: {why}",
                                         "check the reference and your registry credentials (docker login)")]
    out = []
    for req in result.requirements:
        if req.met:
            out.append(loaded.source.diagnostic(path, "plan.image-requirement",
                                                f"image {env.image} meets {req.requirement}: {req.reason}",
                                                None, "info"))
        else:
            out.append(loaded.source.diagnostic(
                path, "plan.image-requirement", f"image {env.image} does not meet {req.requirement}: {req.reason}",
                f"rebuild the image with it (templates/docker/openmpi-rdma) or fix environments.{name}.requires"))
    return out


def image_requirement_diagnostics(loaded: LoadedStack) -> list[Diagnostic]:
    names = [n for n, env in loaded.stack.environments.items() if env.image and env.requires]
    if not names:
        return []
    with ThreadPoolExecutor(max_workers=min(MAX_IMAGES_AT_ONCE, len(names))) as pool:
        return [d for found in pool.map(lambda n: _check_one(loaded, n), names) for d in found]

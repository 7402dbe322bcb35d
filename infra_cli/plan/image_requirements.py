"""`infra plan --check-images`: prove each custom image meets its environment's `requires:` before apply.

Reads the images' layers (image's check_image, no Docker daemon), concurrently; an unmet requirement or an
unreadable image is an error at the environment's `image:` line. A `build:` environment has no image yet: an info
line says it was not checked.
"""

from __future__ import annotations


from infra_cli.arguments import NextStep
from infra_cli.azure.protocol import read_pool
from infra_cli.diagnostics import Diagnostic, DiagnosticError, says
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


def _not_checked(loaded: LoadedStack, name: str) -> Diagnostic:
    """A `build:` environment has no image to read until Azure ML builds it: said, never passed over in silence."""
    env = loaded.stack.environments[name]
    what = f"template {env.build.template}" if env.build.template else "its Dockerfile"
    return loaded.source.diagnostic(
        ("environments", name, "build"), "plan.image-not-checked",
        f"environment {name!r}: requires ({', '.join(env.requires)}) not checked against an image: a build: "
        f"environment has no image until Azure ML builds it (validate judged what {what} installs)",
        says("after apply, check the image Azure ML built (its name is in the environment's build log) with ",
             NextStep(("infra", "image", "check"), ("IMAGE", "--require", "SPEC"))), "info")


def image_requirement_diagnostics(loaded: LoadedStack) -> list[Diagnostic]:
    envs = loaded.stack.environments
    names = [n for n, env in envs.items() if env.image and env.requires]
    out = [_not_checked(loaded, n) for n, env in envs.items() if env.build is not None and env.requires]
    if not names:
        return out
    with read_pool(min(MAX_IMAGES_AT_ONCE, len(names))) as pool:
        return out + [d for found in pool.map(lambda n: _check_one(loaded, n), names) for d in found]

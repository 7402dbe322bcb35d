"""The environment codec: an environment version (workspace or registry) as Azure's REST API answers it, read
into plain values (version_values), and the conda file's text as a version carries it (conda_text).
azure/provider.py sends and receives; this module only translates.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

_VERSION_ID = re.compile(r"/environments/([^/]+)/versions/([^/]+)/?$", re.IGNORECASE)


def conda_text(base_dir: Path, conda_file: str | dict | None) -> str | None:
    """The conda file as an environment version carries it: its YAML loaded and dumped with sorted keys, as
    azure-ai-ml sends it (Environment._translated_conda_file). `conda_file`: a path relative to base_dir, or the
    mapping itself."""
    if not conda_file:
        return None
    data = conda_file if isinstance(conda_file, dict) else yaml.safe_load((base_dir / conda_file).read_text("utf-8"))
    return yaml.dump(data, sort_keys=True)


def version_values(body: dict, next_version: str | None = None) -> dict[str, Any]:
    """An environment version (workspace or registry) -> name (out of its id, as azure-ai-ml reads it), version,
    tags, and its content as recorded (image, conda file's text, build context and Dockerfile), which an import
    block judges and `plan --generate-config-out` writes."""
    found = _VERSION_ID.search(str(body.get("id") or ""))
    name, version = (found.group(1), found.group(2)) if found else (None, body.get("name"))
    props = body.get("properties") or {}
    build = props.get("build") or None
    return {"name": name, "version": version, "tags": dict(props.get("tags") or {}),
            "next_version": next_version,
            "content": {"image": props.get("image"), "conda_file": props.get("condaFile"),
                        "description": props.get("description"),
                        "build": {"context_uri": build.get("contextUri"),
                                  "dockerfile_path": build.get("dockerfilePath")} if isinstance(build, dict) else None}}

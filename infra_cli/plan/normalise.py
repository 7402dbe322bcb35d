"""normalise: what the kinds share in bringing live Azure values to the attribute shape of the stack's, so a plan
right after an apply is empty. Each kind's own normalisation lives in its module (plan/kinds/ Kind.normalise:
cluster.py a compute, environment.py a version); here, the split of a resource's tags every kind makes.
"""

from __future__ import annotations

import re

from infra_cli.conventions import OWNERSHIP_TAGS

# Tags Azure (or its portal) adds on its own; never the user's, never ours.
_AZURE_TAG = re.compile(r"^(hidden-|azureml\.|_aml_system_)", re.IGNORECASE)


def split_tags(tags: dict[str, str] | None) -> tuple[dict[str, str], dict[str, str]]:
    """(the user's tags, our ownership tags)."""
    user, ours = {}, {}
    for k, v in (tags or {}).items():
        if k in OWNERSHIP_TAGS:
            ours[k] = v
        elif not _AZURE_TAG.match(k):
            user[k] = v
    return dict(sorted(user.items())), ours

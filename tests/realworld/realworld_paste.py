"""Paste a public command job YAML into a stack as the README says: the job's keys go into a distribution
as written (its `distribution:` and `resources:` blocks included), `compute:` becomes a cluster entry and
`environment:` an environments entry (JOB_KEYS_ELSEWHERE in infra_cli/stack/model.py says where each key a
distribution does not hold goes)."""

from __future__ import annotations

import textwrap

from infra_cli.stack.distribution import JOB_KEYS_ELSEWHERE

HEADER = """\
stack: pasted
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw-pasted, location: eastus}
"""


def job_lines_for_distribution(job_text: str) -> str:
    """The job's text without the top-level keys a distribution does not hold (each with the indented or
    comment lines under it), everything else byte for byte."""
    kept, dropping = [], False
    for line in job_text.splitlines():
        top = line[:1] not in ("", " ", "\t", "#")
        if top:
            key = line.split(":", 1)[0].strip()
            dropping = key in JOB_KEYS_ELSEWHERE
        if not dropping:
            kept.append(line)
    return "\n".join(kept) + "\n"


def pasted_stack(job_text: str, *, cluster: str | None, size: str, environment: str, max_instances: int = 4,
                 name: str = "job", cluster_extra: str = "", compute: str | None = None) -> str:
    """A stack with the job pasted as distribution `name` on cluster `cluster` (of `size`) and the
    environment entry `environment` (YAML lines under `environments.env:`); `cluster` None: a serverless job
    (no compute:, no cluster entry), or on `compute` (the job's own compute: text, a compute infra does not manage)."""
    return (HEADER
            + (f"clusters:\n  {cluster}:\n    size: {size}\n    max_instances: {max_instances}\n"
               + (f"    {cluster_extra}\n" if cluster_extra else "") if cluster is not None else "")
            + "environments:\n  env:\n" + textwrap.indent(textwrap.dedent(environment).strip("\n"), "    ") + "\n"
            + f"distributions:\n  {name}:\n" + (f"    cluster: {cluster}\n" if cluster is not None else "")
            + (f"    compute: {compute}\n" if compute is not None else "")
            + "    environment: env\n"
            + textwrap.indent(job_lines_for_distribution(job_text), "    "))

"""The stack as declared, in the plan JSON's `configuration` (as `terraform show -json` has the configuration beside
the planned changes): what no Azure resource records but a policy judges, such as a cluster's `infiniband:
required`, a distribution's `instance_count` and the cluster it runs on. Field names are the stack's; sensitive
values are redacted (a Secret as "(sensitive value)", an SSH password or key never shown at all)."""

from __future__ import annotations

from typing import Any

from infra_cli.stack.secret import SHOWN, redacted

KINDS = ("clusters", "environments", "distributions")
_SSH_SECRETS = ("admin_password", "ssh_key_value")


def _shown(declared: dict[str, Any]) -> dict[str, Any]:
    out = redacted(declared)
    ssh = out.get("ssh_settings")
    if isinstance(ssh, dict):
        out["ssh_settings"] = {k: (SHOWN if k in _SSH_SECRETS and v is not None else v) for k, v in ssh.items()}
    return out


def configuration(stack: Any) -> dict[str, dict[str, Any]]:
    """{clusters: {NAME: fields}, environments: {...}, distributions: {...}}, the fields each declares (unset ones
    left out)."""
    return {kind: {name: _shown(model.model_dump(mode="json", exclude_none=True))
                   for name, model in (getattr(stack, kind, None) or {}).items()} for kind in KINDS}

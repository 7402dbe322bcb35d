"""Smoke records: what infra remembers on Azure of each distribution's last smoke (Terraform's "tainted" state).

A record is an environment version (azure/provider.py AzureProvider.record_smoke) whose tags say the result, the
inputs it was judged on (hashes of the cluster, the environment and the distribution's settings), the job and
when; plan reads them back to decide which smoke jobs must run (plan/smoke_pending.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from infra_cli.conventions import TAG_STACK

PASSED, FAILED, PENDING = "passed", "failed", "pending"
INCOMPLETE = "incomplete"  # nothing failed, but the framework could not run (smoke/judge.py): not proven, so pending


@dataclass(frozen=True)
class SmokeInputs:
    """What a smoke result is valid for: one hash per input."""

    cluster: str
    environment: str
    distribution: str

    def encode(self) -> str:  # a tag value (Azure allows 256 characters)
        return f"cluster={self.cluster},environment={self.environment},distribution={self.distribution}"

    @classmethod
    def decode(cls, text: str | None) -> "SmokeInputs | None":
        try:
            parts = dict(p.split("=", 1) for p in (text or "").split(","))
            return cls(parts["cluster"], parts["environment"], parts["distribution"])
        except (KeyError, ValueError):
            return None

    def changed_since(self, other: "SmokeInputs") -> list[str]:
        """The inputs (cluster, environment, distribution) that differ from `other`."""
        return [k for k in ("cluster", "environment", "distribution") if getattr(self, k) != getattr(other, k)]


@dataclass(frozen=True)
class SmokeRecord:
    """The last smoke of a distribution, as recorded on Azure."""

    distribution: str
    result: str  # passed | failed | incomplete | pending
    inputs: SmokeInputs | None
    job: str | None = None
    at: str | None = None
    reason: str | None = None  # why a pending record was written ("cluster changed"), or what an incomplete one lacked
    busbw_gbps: float | None = None  # the peak all_reduce bus bandwidth the smoke measured (GB/s)


# Smoke records are environment versions whose tags say the result and the inputs it was judged on.
_RECORD_TAGS = ("infra.smoke.result", "infra.smoke.inputs", "infra.smoke.job", "infra.smoke.at", "infra.smoke.reason")


def record_tags(stack: str, record: SmokeRecord) -> dict[str, str]:
    return {TAG_STACK: stack, "infra.smoke.distribution": record.distribution,
            "infra.smoke.result": record.result, "infra.smoke.inputs": record.inputs.encode() if record.inputs else "",
            "infra.smoke.job": record.job or "", "infra.smoke.at": record.at or "",
            "infra.smoke.reason": record.reason or "",
            "infra.smoke.busbw": "" if record.busbw_gbps is None else f"{record.busbw_gbps:.3f}"}


def record_from_tags(stack: str, distribution: str, tags: dict[str, str] | None) -> SmokeRecord | None:
    tags = tags or {}
    if tags.get(TAG_STACK) != stack or tags.get("infra.smoke.distribution") != distribution:
        return None  # another stack's or distribution's record under a name that sanitised alike
    result, inputs, job, at, reason = (tags.get(k) for k in _RECORD_TAGS)
    try:
        busbw = float(tags["infra.smoke.busbw"]) if tags.get("infra.smoke.busbw") else None
    except ValueError:   # a tag edited by hand: no figure rather than a wrong one
        busbw = None
    return SmokeRecord(distribution, result or "", SmokeInputs.decode(inputs), job or None, at or None, reason or None,
                       busbw)

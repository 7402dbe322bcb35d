"""Which transport NCCL actually used, read from its debug output (NCCL_DEBUG=INFO).

Standard library only: the smoke script runs inside the user's image with nothing but torch, so the
renderer inlines this module's source into the script; the judge imports it. The patterns and rules are
data (validators/nccl_transport.yaml), passed in as a plain dict.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

UNKNOWN = "unknown"   # NCCL ran, yet its debug output names no transport
# Not NCCL: what the CPU smokes' collectives travel over, named so a verdict line reads as what ran, not as a fault.
GLOO_TCP = "gloo-tcp"   # torch.distributed's gloo backend: TCP between ranks
GRPC_TCP = "grpc-tcp"   # TensorFlow's CPU ring collectives: gRPC over TCP


def _compiled(rules: dict[str, Any]) -> dict[str, "re.Pattern[str]"]:
    return {name: re.compile(rx) for name, rx in rules["patterns"].items()}


def evidence_lines(lines: Iterable[str], rules: dict[str, Any]) -> list[str]:
    """The lines any pattern matches: all the classifier needs, so ranks ship only these."""
    patterns = list(_compiled(rules).values())
    return [line.rstrip("\n") for line in lines if any(p.search(line) for p in patterns)]


def classify_transport(lines: Iterable[str], rules: dict[str, Any]) -> dict[str, Any]:
    """Classify NCCL debug lines (of every rank together) into one transport with its evidence."""
    patterns = _compiled(rules)
    ib_net = re.compile(rules["infiniband_nets"])
    socket_net = re.compile(rules["socket_nets"])
    seen: dict[str, list[re.Match]] = {name: [] for name in patterns}
    kept: list[str] = []
    limit = int(rules.get("max_evidence_lines", 40))
    for line in lines:
        hit = False
        for name, pattern in patterns.items():
            m = pattern.search(line)
            if m:
                seen[name].append(m)
                hit = True
        if hit and len(kept) < limit:
            kept.append(line.rstrip("\n").strip())

    def net_matches(name: str, net_kind: str | None) -> bool:
        if not seen[name]:
            return False
        if net_kind is None:
            return True
        wanted = ib_net if net_kind == "infiniband" else socket_net
        return any(wanted.search(m.group("net") or "") for m in seen[name])

    transport, why = UNKNOWN, "no NCCL channel or network lines in the debug output"
    for rule in rules["transport_rules"]:
        net_kind = rule.get("net")
        if "all" in rule and not all(net_matches(n, net_kind) for n in rule["all"]):
            continue
        if "any" in rule and not any(net_matches(n, net_kind) for n in rule["any"]):
            continue
        if any(seen[n] for n in rule.get("none", ())):
            continue
        transport, why = rule["transport"], rule["why"]
        break

    networks = sorted({m.group("net") for m in seen["using_network"]})
    channel_nets = sorted({m.group("net") for m in seen["channel_net"]})
    ib_devices = sorted({m.group("devices").strip() for m in seen["ib_devices"]})
    nodes = [int(m.group("nodes")) for m in seen["comm_nodes"]]
    return {
        "transport": transport,
        "why": why,
        "gdrdma": any(m.group("gdrdma") for m in seen["channel_net"] if ib_net.search(m.group("net") or "")),
        "networks": networks,
        "channel_nets": channel_nets,
        "ib_devices": ib_devices,
        "ib_link_layers": sorted(set(re.findall(r":\d+/(IB|RoCE)\b", " ".join(ib_devices)))),
        "ib_device_found": bool(seen["ib_devices"]) and not seen["ib_none"],
        "nccl_nodes": max(nodes) if nodes else None,
        "counts": {name: len(ms) for name, ms in seen.items() if ms},
        "evidence": kept,
    }

"""validators/nccl_transport.yaml: how the smoke judge reads NCCL's debug output.

The classifier (smoke/transport.py) runs inside the user's image with the standard library only, so it
takes the rules as a plain dict (`TransportRules.plain`, also rendered into the smoke script); this loader
checks that dict once, so a hand-edited file fails here with its line rather than in a job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from infra_cli.knowledge.reader import at, load, mapping, sequence

FILE = "nccl_transport.yaml"
HINT = ("fix validators/nccl_transport.yaml: debug_env (variable: value), patterns (name: regular expression), "
        "infiniband_nets, socket_nets, transport_rules (transport, any/all/none of pattern names, why)")
# The patterns and named groups smoke/transport.py reads by name.
_NEEDED = {"channel_net": ("net", "gdrdma"), "using_network": ("net",), "ib_devices": ("devices",),
           "ib_none": (), "comm_nodes": ("nodes",)}


@dataclass(frozen=True)
class TransportRules:
    debug_env: dict[str, str]           # what the smoke job sets so NCCL writes the lines read here
    patterns: dict[str, str]
    transport_rules: tuple[dict[str, Any], ...]
    plain: dict[str, Any]               # the file as the classifier takes it


def _rules(data: Any) -> TransportRules:
    data = mapping(data, FILE)
    with at("debug_env"):
        debug_env = {str(k): str(v) for k, v in mapping(data["debug_env"], "debug_env").items()}
    patterns = {}
    with at("patterns"):
        for name, rx in mapping(data["patterns"], "patterns").items():
            with at(name):
                patterns[str(name)] = re.compile(str(rx))
        for name, groups in _NEEDED.items():
            with at(name):
                if name not in patterns:
                    raise KeyError(name)
                missing = [g for g in groups if g not in patterns[name].groupindex]
                if missing:
                    raise ValueError(f"the pattern needs the named group(s) {', '.join(missing)}")
    for key in ("infiniband_nets", "socket_nets"):
        with at(key):
            re.compile(str(data[key]))
    rules = []
    for i, rule in enumerate(sequence(data["transport_rules"], "transport_rules")):
        with at("transport_rules", i):
            rule = mapping(rule, "a transport rule")
            str(rule["transport"]), str(rule["why"])
            names = [*sequence(rule.get("any"), "any"), *sequence(rule.get("all"), "all")]
            unknown = [n for n in [*names, *sequence(rule.get("none"), "none")] if n not in patterns]
            if not names or unknown:
                raise ValueError(f"any/all must name patterns, none may ({', '.join(patterns)}); unknown: {unknown}")
            if rule.get("net") not in (None, "infiniband", "socket"):
                raise ValueError(f"net must be infiniband or socket, not {rule['net']!r}")
            rules.append(dict(rule))
    with at("max_evidence_lines"):
        int(data.get("max_evidence_lines", 40))
    return TransportRules(debug_env, {k: p.pattern for k, p in patterns.items()}, tuple(rules), dict(data))


def transport_rules() -> TransportRules:
    return load(FILE, _rules, hint=HINT)

"""Why a smoke job failed, read from its logs, so nobody has to open 16 ranks' logs in the studio.

Pure: logs in (name -> text), findings out. Two kinds of finding, most specific first:
- known signatures (validators/failure_signatures.yaml): a line pattern with its cause and fix;
- each log's last Python exception, grouped, so 16 ranks that died of one error read as one finding.
When neither shows, the tail of the first rank's log (else the launcher's, in system_logs/) is the finding. Secrets are redacted from every
line shown (SAS signatures, bearer tokens, account keys, passwords).
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from typing import Mapping

from infra_cli.knowledge.failure_signatures import Signature, signatures as known_signatures

_MAX_LINE = 300
_TAIL_LINES = 12
_TRACEBACK = "Traceback (most recent call last):"
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure|Fault)\b(?::.*)?$")
_SECRETS = [
    (re.compile(r"(?i)\b(sig|se|skoid|sktid|skt|ske|sks|skv)=[^&\s\"'<>]+"), r"\1=REDACTED"),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+"), r"\1REDACTED"),
    (re.compile(r"(?i)\b(AccountKey|SharedAccessKey|password|passwd|secret|token)(\s*[=:]\s*)[^;\s\"'&]+"), r"\1\2REDACTED"),
]


@dataclass(frozen=True)
class Finding:
    cause: str
    fix: str | None
    lines: tuple[str, ...]          # what the logs say (redacted, shortened)
    logs: tuple[str, ...]           # every log it was seen in
    signature: str | None = None    # the signature's id; None for an exception or a log tail

    def to_json(self) -> dict:
        return {"signature": self.signature, "cause": self.cause, "fix": self.fix, "lines": list(self.lines),
                "logs": list(self.logs)}

    def render(self) -> list[str]:
        """Indented lines under a verdict."""
        where = self.logs[0] + (f" (+{len(self.logs) - 1} more)" if len(self.logs) > 1 else "")
        out = [f"  why     {self.cause}"]
        if self.fix:
            out.append(f"          fix: {self.fix}")
        out.append(f"          seen in {where}:")
        out += [f"            {line}" for line in self.lines]
        return out


def redact(line: str) -> str:
    for rx, replacement in _SECRETS:
        line = rx.sub(replacement, line)
    return line


def _shown(line: str) -> str:
    line = redact(line.rstrip())
    return line if len(line) <= _MAX_LINE else line[:_MAX_LINE - 1] + "…"


def _signature_findings(logs: Mapping[str, str], signatures: tuple[Signature, ...], emulated: bool,
                        nodes: int | None) -> list[Finding]:
    found = []
    for sig in signatures:
        if sig.multi_node_only and nodes == 1:
            continue
        where: list[str] = []
        first: re.Match | None = None
        for name, text in logs.items():
            match = next((m for m in map(sig.regex.search, text.splitlines()) if m), None)
            if match:
                where.append(name)
                first = first or match
        if first is not None:
            groups = [first.group(0), *(g or "" for g in first.groups())]
            fix = sig.fix_emulated if emulated and sig.fix_emulated else sig.fix
            # {python}: the interpreter the emulator's jobs ran on, infra's own, whose pip must install the fix
            # (a `venv/bin/infra` run without activating the venv: the `pip` on PATH is another Python's)
            found.append(Finding(sig.cause.format(*groups),
                                 fix.format(*groups, python=shlex.quote(sys.executable)) if fix else None,
                                 (_shown(first.string),), tuple(where), sig.id))
    return found


def last_exception(text: str) -> str | None:
    """The exception line that ends the log's last Python traceback."""
    at = text.rfind(_TRACEBACK)
    if at < 0:
        return None
    candidates = [line for line in text[at:].splitlines()[1:] if line and not line[0].isspace()]
    return next((line for line in reversed(candidates) if _EXCEPTION_LINE.match(line)), None)


def diagnose(logs: Mapping[str, str], signatures: tuple[Signature, ...] | None = None, *,
             emulated: bool = False, nodes: int | None = None) -> list[Finding]:
    """Findings for a failed job's logs (name -> text), most specific first. `emulated`: the job ran on the local
    emulator (with infra's own Python), whose fix differs where a signature says so (fix_emulated). `nodes`: the
    job's instance count, where known (a multi_node_only signature is no cause on one node)."""
    findings = _signature_findings(logs, signatures if signatures is not None else known_signatures(), emulated,
                                   nodes)
    explained = {line for f in findings for line in f.lines}
    by_exception: dict[str, list[str]] = {}
    for name, text in logs.items():
        line = last_exception(text)
        if line is not None and _shown(line) not in explained:
            by_exception.setdefault(_shown(line), []).append(name)
    for line, names in by_exception.items():
        findings.append(Finding(f"{len(names)} of {len(logs)} logs end in this Python exception", None, (line,),
                                tuple(names)))
    if not findings and logs:
        # The first rank's log, else the launcher's (mpirun, in system_logs/), else any log that says something.
        order = sorted(logs, key=lambda n: (not ("process_0" in n or n.endswith("std_log.txt")),
                                            not n.startswith("system_logs/"), n))
        first = next((n for n in order if logs[n].strip()), None)
        if first is not None:
            tail = [_shown(line) for line in logs[first].splitlines() if line.strip()][-_TAIL_LINES:]
            findings.append(Finding(f"no known error in the logs; the last lines of {first}", None, tuple(tail),
                                    (first,)))
    return findings

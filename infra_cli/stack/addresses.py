"""Addresses: `cluster.NAME`, `environment.NAME`, `smoke.DISTRIBUTION`, read by one grammar, here.

Every place a user names a resource by its address, or by its name in Azure, reads it through this module
before anything else happens (before a stack's workspace is reached, before any request): `infra state rm`,
`infra import ADDR AZURE_NAME`, `plan --replace`, `plan --target` and a stack's `import:` blocks. NAME is a name
Azure ML accepts for that kind (validators/names.yaml, the rows a stack's own names are checked by), and whatever
those rows say, never more than letters, digits, '-', '_' and '.' starting with a letter or digit, at most 255
characters: a name read here is always one whole segment of a request URL (azure/url.py `segment` quotes it
again, as azure-core quotes the SDKs' path arguments).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from infra_cli.diagnostics import Diagnostic, DiagnosticError
from infra_cli.knowledge.names import NameRule, name_rules

RULE = "address.invalid"
RESOURCES = ("cluster", "environment")           # what is imported, replaced and forgotten
EVERY_KIND = ("cluster", "environment", "smoke")  # what a --target names

# kind -> (the validators/names.yaml row its NAME is held to, what NAME stands for, an example NAME, what NAME is)
_KINDS = {
    "cluster": ("cluster.name", "NAME", "gpu-a100", "a cluster name"),
    "environment": ("environment.name", "NAME", "pytorch-train", "an environment name"),
    "smoke": ("distribution.name", "DISTRIBUTION", "ddp", "a distribution name"),
}
# The floor no edit of validators/names.yaml can lower: one URL segment, never a dot-segment or an escape.
_URL_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")
_SHOWN = 60   # characters of a refused address repeated in a message


@dataclass(frozen=True)
class Address:
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}.{self.name}"


class AddressError(ValueError):
    """Text that is not an address (or a name) of the grammar: `message` says what, `hint` how to write one,
    `detail` the rule its NAME breaks (None when the text is not of the form KIND.NAME at all)."""

    def __init__(self, message: str, hint: str, detail: str | None = None):
        super().__init__(f"{message} ({hint})")
        self.message, self.hint, self.detail = message, hint, detail


def shown(text: str) -> str:
    """Refused text as a message repeats it: quoted with control characters escaped (repr), long text cut."""
    if len(text) <= _SHOWN:
        return repr(text)
    return f"{text[:_SHOWN]!r}... ({len(text)} characters)"


def grammar(kinds: tuple[str, ...] = RESOURCES) -> str:
    """`cluster.NAME or environment.NAME`: the forms `kinds` are written in."""
    forms = [f"{k}.{_KINDS[k][1]}" for k in kinds]
    return forms[0] if len(forms) == 1 else ", ".join(forms[:-1]) + " or " + forms[-1]


def example(kinds: tuple[str, ...] = RESOURCES) -> str:
    return " or ".join(f"{k}.{example_name(k)}" for k in kinds)


def example_name(kind: str) -> str:
    return _KINDS[kind][2]


def what_name(kind: str) -> str:
    """`a cluster name`, `an environment name`, `a distribution name`."""
    return _KINDS[kind][3]


def _name_rule(kind: str) -> NameRule | None:
    rule_id = _KINDS[kind][0]
    return next((r for r in name_rules() if r.rule_id == rule_id), None)


def name_problem(kind: str, name: str) -> str | None:
    """What is wrong with `name` as the NAME of a `kind` address (Azure's rule for it, in words); None if nothing."""
    rule = _name_rule(kind)
    azure_refuses = rule is not None and isinstance(name, str) and not rule.pattern.fullmatch(name)
    if not isinstance(name, str) or not _URL_SAFE.fullmatch(name) or azure_refuses:
        words = rule.rule if rule is not None else ("at most 255 letters, digits, '-', '_' or '.', starting with a "
                                                    "letter or digit")
        return f"{what_name(kind)} is {words}"
    return None


def check_name(kind: str, name: str, *, what: str = "NAME") -> str:
    """`name` when Azure accepts it as a `kind`'s name; AddressError naming the rule and an example otherwise."""
    problem = name_problem(kind, name)
    if problem is not None:
        raise AddressError(f"{what} {shown(name)} is not {what_name(kind)} Azure ML accepts: {problem}",
                           f"for example {example_name(kind)}", problem)
    return name


def parse_address(text: str, kinds: tuple[str, ...] = RESOURCES, *, what: str = "") -> Address:
    """The address `text` writes, one of `kinds`; AddressError (naming the grammar and an example) otherwise.
    `what`: where the text came from (`--target`), said first in the message."""
    head = f"{what} " if what else ""
    hint = f"write {grammar(kinds)}, for example {example(kinds)}"
    kind, dot, name = text.partition(".") if isinstance(text, str) else ("", "", "")
    if not dot or kind not in kinds:
        raise AddressError(f"{head}{shown(str(text))} is not an address: an address here is {grammar(kinds)}", hint)
    problem = name_problem(kind, name)
    if problem is not None:
        detail = f"in {grammar((kind,))}, {problem}"
        raise AddressError(f"{head}{shown(text)} is not an address: {detail}",
                           f"write {grammar((kind,))}, for example {kind}.{example_name(kind)}", detail)
    return Address(kind, name)


def refused(exc: AddressError, file: str | None) -> DiagnosticError:
    """The error a command reports for text the grammar refused."""
    return DiagnosticError([Diagnostic("error", RULE, exc.message, file, None, None, exc.hint)])


def parsed(text: str, kinds: tuple[str, ...] = RESOURCES, *, file: str | None = None, what: str = "") -> Address:
    """parse_address, refusing with the command's diagnostic (rule address.invalid) at `file`."""
    try:
        return parse_address(text, kinds, what=what)
    except AddressError as exc:
        raise refused(exc, file) from None

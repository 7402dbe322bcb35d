"""Output values, as Terraform's `output`: `outputs: {NAME: {value, description, sensitive}}`, where a value is
a reference to a resource's attribute (`${cluster.a100.id}`) or text around such references.

The attributes each resource type has (the contract `infra output` and the README document):
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, says
from infra_cli.stack.secret import Secret, contains_secret
from infra_cli.stack.variables import as_text

# type -> attribute -> what it is
ATTRIBUTES: dict[str, dict[str, str]] = {
    "cluster": {
        "id": "the cluster's ARM resource id",
        "name": "its Azure ML name",
        "size": "its VM size",
        "max_instances": "the most nodes it scales to",
        "location": "its Azure region",
        "provisioning_state": "Succeeded, Creating, Failed, ...",
    },
    "environment": {
        "asset_id": "azureml:NAME:VERSION, what a job's `environment:` names",
        "name": "its Azure ML name",
        "version": "the live version",
        "image": "the image it runs",
    },
    "smoke": {
        "verdict": "passed, failed, incomplete or pending: the last smoke of the distribution",
        "busbw_gbps": "the peak all_reduce bus bandwidth it measured, GB/s",
        "job_name": "the Azure ML job that ran it",
        "ran_at": "when it ran (UTC, ISO 8601)",
    },
}
SECTION = {"cluster": "clusters", "environment": "environments", "smoke": "distributions"}
REFERENCE = re.compile(r"\$\{([^{}]*)\}")
UNKNOWN = object()   # a value not known until apply


@dataclass(frozen=True)
class Reference:
    type: str
    name: str
    attribute: str

    @property
    def address(self) -> str:
        return f"{self.type}.{self.name}"


def references(text: str) -> Iterator[tuple[str, Reference | None]]:
    """Each `${...}` in an output's value: its text, and the reference it makes (None: not TYPE.NAME.ATTRIBUTE)."""
    for m in REFERENCE.finditer(text):
        parts = m.group(1).split(".")
        yield m.group(0), Reference(*parts) if len(parts) == 3 and all(parts) else None


def check_outputs(stack: Any, source: Any) -> list[Diagnostic]:
    """An error at the value's line for each reference to an address the stack does not declare or an attribute
    its type does not have."""
    out = []
    for name, output in stack.outputs.items():
        path = ("outputs", name, "value")
        value = output.value.reveal() if isinstance(output.value, Secret) else output.value
        if contains_secret(output.value) and not output.sensitive:   # Terraform: "Output refers to sensitive values"
            written = source.written.get(path) or "a sensitive value"
            out.append(source.diagnostic(path, "output.sensitive", f"output {name!r} refers to sensitive values: "
                                         f"{short_text(written)} holds a sensitive variable or a ${{ENV}} value",
                                         says("add `sensitive: true` to the output (it is then shown only when "
                                              "asked for by name: ", NextStep(("infra", "output"), ("STACK", "NAME")),
                                              "), or leave the sensitive value out")))
        texts = [value] if isinstance(value, str) else []
        if not texts or not any(True for _ in references(texts[0])):
            out.append(source.diagnostic(path, "output.no-reference", f"output {name!r} refers to no resource",
                                         says("write a reference such as \"${cluster.NAME.id}\" (see ",
                                              NextStep(("infra", "schema")), ")")))
            continue
        for written, ref in references(texts[0]):
            if ref is None or ref.type not in ATTRIBUTES:
                out.append(source.diagnostic(path, "output.reference", f"output {name!r}: {written} is not a "
                                             "resource attribute", "write ${cluster.NAME.ATTR}, "
                                             "${environment.NAME.ATTR} or ${smoke.DISTRIBUTION.ATTR}"))
            elif ref.name not in getattr(stack, SECTION[ref.type]):
                declared = ", ".join(getattr(stack, SECTION[ref.type])) or "none"
                out.append(source.diagnostic(path, "output.unknown-address", f"output {name!r}: the stack has no "
                                             f"{ref.address}", f"declared under {SECTION[ref.type]}: {declared}"))
            elif ref.attribute not in ATTRIBUTES[ref.type]:
                out.append(source.diagnostic(path, "output.unknown-attribute", f"output {name!r}: a {ref.type} has "
                                             f"no attribute {ref.attribute!r}",
                                             f"{ref.type} attributes: {', '.join(ATTRIBUTES[ref.type])}"))
    return out


def short_text(text: str) -> str:
    return text if len(text) <= 80 else text[:60] + "..."


def evaluate(value: Any, lookup: Callable[[Reference], Any]) -> Any:
    """The output's value: exactly one reference keeps the attribute's type; text around references is text.
    UNKNOWN when a reference is not known yet (`lookup` returns UNKNOWN). Text holding a secret is a secret."""
    if isinstance(value, Secret):
        got = evaluate(value.reveal(), lookup)
        return got if got is UNKNOWN else Secret(got)
    if not isinstance(value, str):
        return value
    refs = list(references(value))
    if len(refs) == 1 and refs[0][0] == value and refs[0][1] is not None:
        return lookup(refs[0][1])
    unknown = False

    def replace(m: re.Match) -> str:
        nonlocal unknown
        parts = m.group(1).split(".")
        got = lookup(Reference(*parts)) if len(parts) == 3 else None
        if got is UNKNOWN:
            unknown = True
            return ""
        return "" if got is None else (as_text(got) or str(got))

    text = REFERENCE.sub(replace, value)
    return UNKNOWN if unknown else text


def shown(value: Any) -> str:
    """A value as `infra output` and apply's `Outputs:` print it (Terraform's HCL-like form)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if value is None:
        return "null"
    text = as_text(value)
    return text if text is not None else json.dumps(value)

"""A command job's inputs as azure-ai-ml's load_job reads them (validators/job_schema.yaml `input_types` and
`literal_input`, generated from its own schema): a value (number, text, true/false), `{value: ...}`, or data
`{type, path, mode, ...}` of one of the data types. A component's declaration pasted into a job
(`epochs: {type: integer}`, a literal type with or without `default`) is none of them: load_job refuses the job
file, so `infra render` could not write one it loads.

https://learn.microsoft.com/azure/machine-learning/reference-yaml-job-command#job-inputs
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from infra_cli.knowledge.job_schema import job_schema

# The literal types of a component's inputs (https://learn.microsoft.com/azure/machine-learning/reference-yaml-component-command#component-inputs)
COMPONENT_LITERAL_TYPES = ("integer", "number", "boolean", "string")


@dataclass(frozen=True)
class InputProblem:
    message: str   # what is wrong, after "input NAME of distribution D "
    hint: str
    key: str | None = None   # the key of the input's mapping the problem is at, if one


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _shown(value: Any) -> str:
    return json.dumps(value, default=str) if not isinstance(value, str) else value


def input_problem(name: str, value: Any) -> InputProblem | None:
    """Why load_job refuses input `name` written as `value`, with the fix; None when it reads it."""
    schema = job_schema()
    data_types = ", ".join(schema.input_types)
    data_fix = f"data takes `type` ({data_types}) and `path`, e.g. {name}: {{type: uri_folder, path: azureml:NAME@latest}}"
    if _scalar(value):
        return None
    if value is None:
        return InputProblem("has no value (azure-ai-ml's load_job refuses the job: \"Field may not be null\")",
                            f"give it its value ({name}: 10), or, if it is data, {data_fix}")
    if not isinstance(value, dict):
        return InputProblem("is a list: a job's input is one value or one data asset (load_job refuses the job)",
                            f"give it one value ({name}: VALUE), or, if it is data, {data_fix}")
    kind = value.get("type")
    if kind is not None:
        row = schema.input_types.get(str(kind).lower())
        if row is None:
            given = value.get("value", value.get("default"))
            if str(kind).lower() in COMPONENT_LITERAL_TYPES:
                what = (f"is declared as a component declares its inputs ({{type: {kind}}}), not as a job passes "
                        f"one: azure-ai-ml's load_job refuses a `type: {kind}` input")
                fix = (f"write the value alone: {name}: {_shown(given)}" if _scalar(given) else
                       f"give it its value: {name}: VALUE (or {{value: VALUE}})")
                return InputProblem(what, f"{fix}; if it is data, {data_fix}", "type")
            close = difflib.get_close_matches(str(kind).lower(), list(schema.input_types), n=1, cutoff=0.6)
            return InputProblem(f"has type {kind!r}, which is no input type of a job (load_job refuses the job)",
                                (f"did you mean {close[0]!r}? " if close else "")
                                + f"a job's input is a value ({name}: 10), or {data_fix}", "type")
        extra = [k for k in value if k not in row.keys]
        if extra:
            return InputProblem(f"has {', '.join(map(repr, extra))}, which a {kind} input does not take "
                                "(load_job refuses the job: \"Unknown field\")",
                                f"a {kind} input takes {', '.join(row.keys)}", str(extra[0]))
        mode = value.get("mode")
        if mode is not None and str(mode).lower() not in row.modes:
            return InputProblem(f"has mode {mode!r}, which a {kind} input does not take (load_job refuses the job)",
                                f"use one of {', '.join(row.modes)}", "mode")
        return None
    if "value" in value:
        extra = [k for k in value if k not in schema.literal_input]
        if extra:
            return InputProblem(f"has {', '.join(map(repr, extra))} beside its value (load_job refuses the job)",
                                f"a value is written alone: {name}: {_shown(value['value'])}", str(extra[0]))
        if not _scalar(value["value"]):
            return InputProblem("has a value that is not a number, text or true/false (load_job refuses the job)",
                                f"give one value: {name}: VALUE, or, if it is data, {data_fix}", "value")
        return None
    data_keys = {k for row in schema.input_types.values() for k in row.keys} - {"type"}
    extra = [k for k in value if k not in data_keys]
    if extra:
        return InputProblem(f"has {', '.join(map(repr, extra))}, which no job input takes (load_job refuses the "
                            "job: \"Unknown field\")", f"a value is written alone ({name}: 10); {data_fix}",
                            str(extra[0]))
    return None

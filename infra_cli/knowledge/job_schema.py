"""validators/job_schema.yaml: the keys of Azure ML's command job YAML, as the pinned azure-ai-ml reads them.

Generated from azure-ai-ml's own schema (bench/job_schema.py), so `infra validate` knows a job's keys without
importing azure.ai.ml; tests/realworld/test_job_schema.py holds the file equal to the installed azure-ai-ml's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra_cli.knowledge.reader import at, load, mapping, sequence

FILE = "job_schema.yaml"
HINT = ("regenerate validators/job_schema.yaml with `python bench/job_schema.py` (it needs source, azure_ai_ml, "
        "command_job, read_only, resources, limits, queue_settings, services and distribution, each a list of keys, "
        "input_types, each type's keys and modes, and literal_input, the keys of {value: ...})")
BLOCKS = ("command_job", "read_only", "resources", "limits", "queue_settings", "services")


@dataclass(frozen=True)
class JobSchema:
    """The keys of each block of a command job (a sorted tuple each); distribution: keys per type."""

    source: str
    azure_ai_ml: str
    command_job: tuple[str, ...]
    read_only: tuple[str, ...]
    resources: tuple[str, ...]
    limits: tuple[str, ...]
    queue_settings: tuple[str, ...]
    services: tuple[str, ...]
    distribution: dict[str, tuple[str, ...]]
    input_types: dict[str, "InputType"]   # a data input's type -> its keys and modes
    literal_input: tuple[str, ...]        # the keys of a literal input written as a mapping ({value: 1})


@dataclass(frozen=True)
class InputType:
    keys: tuple[str, ...]
    modes: tuple[str, ...]


def _keys(value: Any, what: str) -> tuple[str, ...]:
    keys = sequence(value, what)
    if not all(isinstance(k, str) and k for k in keys):
        raise ValueError(f"{what} must be a list of key names")
    return tuple(keys)


def _schema(data: Any) -> JobSchema:
    data = mapping(data, FILE)
    blocks = {}
    for block in BLOCKS:
        with at(block):
            blocks[block] = _keys(data[block], block)
    with at("distribution"):
        distribution = {kind: _keys(keys, f"distribution.{kind}")
                        for kind, keys in mapping(data["distribution"], "distribution").items()}
    with at("input_types"):
        input_types = {}
        for kind, row in mapping(data["input_types"], "input_types").items():
            row = mapping(row, f"input_types.{kind}")
            input_types[str(kind)] = InputType(_keys(row["keys"], f"input_types.{kind}.keys"),
                                               _keys(row["modes"], f"input_types.{kind}.modes"))
    with at("literal_input"):
        literal_input = _keys(data["literal_input"], "literal_input")
    return JobSchema(str(data["source"]), str(data["azure_ai_ml"]), distribution=distribution,
                     input_types=input_types, literal_input=literal_input, **blocks)


def job_schema() -> JobSchema:
    return load(FILE, _schema, hint=HINT)

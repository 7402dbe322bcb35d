"""Azure's REST specification (Swagger 2.0 definitions, checked in under fixtures/schemas) as JSON Schema.

Swagger 2.0 is not JSON Schema, so the definitions are translated before jsonschema sees them:
- `allOf` parents are merged into the child (properties, required): Swagger's inheritance, which a child
  with `additionalProperties: false` needs (JSON Schema would check each part of an allOf on its own);
- a `$ref` to a base with a `discriminator` checks the subtype named by the discriminator's value
  (`x-ms-discriminator-value`), e.g. `computeType: AmlCompute` -> AmlCompute;
- `x-nullable: true` also admits null;
- for a REQUEST, a `readOnly` property must be absent (the server fills it in); for a RESPONSE it may be there;
- `format: duration` is checked as ISO 8601 (the only format whose value infra computes).
$refs are resolved locally: each file is registered under its path in Azure/azure-rest-api-specs, so the
spec's own relative refs (`../../../../../common-types/...`) find the checked-in copy.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

SCHEMAS = Path(__file__).parent / "fixtures" / "schemas"
SPEC_ROOT = "https://github.com/Azure/azure-rest-api-specs/blob/main/specification/"
ML = SPEC_ROOT + "machinelearningservices/resource-manager/Microsoft.MachineLearningServices/stable/2024-10-01/"
COMPUTE_SPEC = ML + "machineLearningServices.json"
ASSETS_SPEC = ML + "mfe.json"
SKUS_SPEC = SPEC_ROOT + "compute/resource-manager/Microsoft.Compute/Skus/stable/2021-07-01/skus.json"
# the api-versions azure-ai-ml and azure-mgmt-compute send for the routes below (fixtures/README.md)
_ML_PREVIEW = SPEC_ROOT + "machinelearningservices/resource-manager/Microsoft.MachineLearningServices/preview/"
ML_LOCATION_SPEC = _ML_PREVIEW + "2023-08-01-preview/machineLearningServices.json"
ASSETS_PREVIEW_SPEC = _ML_PREVIEW + "2024-10-01-preview/mfe.json"
WORKSPACE_SPEC = _ML_PREVIEW + "2024-10-01-preview/workspaceRP.json"
COMPUTE_RP_SPEC = SPEC_ROOT + "compute/resource-manager/Microsoft.Compute/ComputeRP/stable/2025-04-01/computeRPCommon.json"
_FILES = {
    COMPUTE_SPEC: "machineLearningServices-2024-10-01.json",
    ASSETS_SPEC: "mfe-2024-10-01.json",
    SKUS_SPEC: "skus-2021-07-01.json",
    ML_LOCATION_SPEC: "machineLearningServices-2023-08-01-preview.json",
    ASSETS_PREVIEW_SPEC: "mfe-2024-10-01-preview.json",
    WORKSPACE_SPEC: "workspaceRP-2024-10-01-preview.json",
    COMPUTE_RP_SPEC: "computeRPCommon-2025-04-01.json",
    SPEC_ROOT + "common-types/resource-management/v3/types.json": "common-types-v3-types.json",
    SPEC_ROOT + "common-types/resource-management/v3/managedidentity.json": "common-types-v3-managedidentity.json",
}
# ISO 8601 duration as Azure writes it (PT5M, PT120S, P1DT2H)
_DURATION = re.compile(r"^P(?!$)(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$")
_FORMATS = jsonschema.FormatChecker(formats=())
# `not {}` rather than the schema `false`: jsonschema reports a `false` schema's errors without their path
_READ_ONLY = {"not": {}, "title": "readOnly"}


@_FORMATS.checks("duration")
def _is_duration(value: object) -> bool:
    return not isinstance(value, str) or bool(_DURATION.match(value))


def _absolute_refs(node: object, base: str) -> object:
    if isinstance(node, dict):
        return {k: (urljoin(base, v) if k == "$ref" else _absolute_refs(v, base)) for k, v in node.items()}
    if isinstance(node, list):
        return [_absolute_refs(v, base) for v in node]
    return node


@lru_cache(maxsize=None)
def _documents() -> dict[str, dict]:
    return {uri: _absolute_refs(json.loads((SCHEMAS / name).read_text()), uri) for uri, name in _FILES.items()}


def _lookup(ref: str) -> dict:
    uri, fragment = urldefrag(ref)
    node = _documents()[uri]
    for part in fragment.strip("/").split("/"):
        node = node[part]
    return node


def _flattened(ref: str) -> dict:
    """A definition with its allOf parents merged in (Swagger inheritance)."""
    definition = copy.deepcopy(_lookup(ref))
    parents = definition.pop("allOf", [])
    properties, required = {}, []
    for parent in parents:
        merged = _flattened(parent["$ref"])
        properties.update(merged.get("properties", {}))
        required += merged.get("required", [])
    properties.update(definition.get("properties", {}))
    required += definition.get("required", [])
    if properties:
        definition["properties"] = properties
    if required:
        definition["required"] = sorted(set(required))
    return definition


def _subtypes(base: str) -> list[tuple[str, str]]:
    """(discriminator value, definition ref) of every definition that extends `base`."""
    uri, _ = urldefrag(base)
    out = []
    for name, definition in _documents()[uri]["definitions"].items():
        value = definition.get("x-ms-discriminator-value")
        if value and any(p.get("$ref") == base for p in definition.get("allOf", [])):
            out.append((value, f"{uri}#/definitions/{name}"))
    return out


def _convert(node: object, request: bool) -> object:
    if isinstance(node, list):
        return [_convert(v, request) for v in node]
    if not isinstance(node, dict):
        return node
    if request and node.get("readOnly"):
        return dict(_READ_ONLY)  # the server's to fill in: a request must not carry it
    nullable = node.get("x-nullable") is True
    if "$ref" in node:
        ref = node["$ref"]
        target = _lookup(ref)
        schema: dict = {"allOf": [{"$ref": ref}]}
        if "discriminator" in target:
            key = target["discriminator"]
            schema["allOf"] += [{"if": {"properties": {key: {"const": value}}, "required": [key]},
                                 "then": {"$ref": sub}} for value, sub in _subtypes(ref)]
    else:
        schema = {k: _convert(v, request) if k in ("properties", "items", "additionalProperties") else v
                  for k, v in node.items() if not k.startswith("x-")}
        if "properties" in node:
            schema["properties"] = {k: _convert(v, request) for k, v in node["properties"].items()}
    return {"anyOf": [schema, {"type": "null"}]} if nullable else schema


@lru_cache(maxsize=None)
def _registry(request: bool) -> Registry:
    resources = []
    for uri, document in _documents().items():
        definitions = {name: _convert(_flattened(f"{uri}#/definitions/{name}"), request)
                       for name in document["definitions"]}
        resources.append((uri, Resource.from_contents({"definitions": definitions}, default_specification=DRAFT7)))
    return Registry().with_resources(resources)


def response_definition(spec: str, path: str, method: str = "get", status: str = "200") -> str:
    """The definition the spec's operation answers with (a trimmed copy that keeps its `paths`)."""
    ref = _documents()[spec]["paths"][path][method]["responses"][status]["schema"]["$ref"]
    return urldefrag(ref)[1].rsplit("/", 1)[-1]


def declared(spec: str, definition: str) -> set[str]:
    """The property names a definition declares, its allOf parents' included: Swagger admits others unless
    additionalProperties is false, so problems() lets through a key Azure never answers; this names what it can."""
    return set(_flattened(f"{spec}#/definitions/{definition}").get("properties", {}))


def problems(instance: object, definition: str, *, request: bool, spec: str = COMPUTE_SPEC) -> list[str]:
    """What in `instance` breaks the spec's `definition` (e.g. "ComputeResource"), one line each, with its path."""
    validator = jsonschema.Draft7Validator({"$ref": f"{spec}#/definitions/{definition}"},
                                           registry=_registry(request), format_checker=_FORMATS)
    found = []
    for error in validator.iter_errors(instance):
        leaves = _leaves(error)
        found += [f"/{'/'.join(str(p) for p in e.absolute_path)}: {_message(e)}" for e in leaves
                  if len(leaves) == 1 or e.validator_value != "null"]  # "not null" says nothing of a nullable
    return sorted(set(found))


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "not" and error.schema == _READ_ONLY:
        return "read-only (Azure fills it in): a request must not carry it"
    return error.message


def _leaves(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    """The innermost errors: an anyOf/allOf failure says little, its causes say what is wrong."""
    if not error.context:
        return [error]
    out = []
    for child in error.context:
        out += _leaves(child)
    return out

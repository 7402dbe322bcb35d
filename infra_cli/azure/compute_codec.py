"""The compute codec: a ComputeResource as Azure's REST API answers it, read into plain values
(compute_values), and the body a full PUT of a cluster sends (compute_body), as azure-ai-ml reads and writes them.

The fields and where they sit are stack/cluster_fields.py's; tests/contract hold the body equal to azure-ai-ml's
serialisation. azure/provider.py sends and receives; this module only translates.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

from infra_cli.azure.protocol import Written
from infra_cli.stack.cluster_fields import CLUSTER_FIELDS, REST, SDK

# what azure-ai-ml calls each kind of compute (Compute._from_rest_object); any other is "unsupported"
_SDK_COMPUTE_TYPES = {t: t for t in ("amlcompute", "computeinstance", "virtualmachine", "kubernetes", "synapsespark")}
UNSUPPORTED_COMPUTE = "*** Unsupported Compute Type ***"


def camel_to_snake(text: str | None) -> str | None:
    """azure-ai-ml's camel_to_snake (azure/ai/ml/_utils/utils.py), comma lists included: "SystemAssigned" ->
    "system_assigned", "LowPriority" -> "low_priority"."""
    if not text:
        return None

    def convert(part: str) -> str:
        part = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", part)
        return re.sub("([a-z0-9])([A-Z])", r"\1_\2", part).lower()

    return ",".join(convert(t.strip()) for t in text.split(",")) if "," in text else convert(text)


_ISO_DURATION = re.compile(r"P(?=\d|T\d)(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def duration_seconds(value: Any) -> float | None:
    """An ISO 8601 duration ("PT5M", "P1DT2H", "PT1.5S") -> seconds; None for none, zero (azure-ai-ml reads a zero
    idle time as none) or a text that is not one."""
    m = _ISO_DURATION.fullmatch(str(value or "").strip().upper())
    if not m or not any(m.groups()):
        return None
    d, h, mi, sec = (float(x) if x else 0.0 for x in m.groups())
    return (d * 86400 + h * 3600 + mi * 60 + sec) or None


class Unreadable(ValueError):
    """A value in Azure's answer whose shape infra cannot read: `expected` says what it reads there. Plan stops on
    it (plan/kinds/cluster.py) rather than compare a misreading, which could propose to replace a healthy cluster."""

    def __init__(self, expected: str):
        super().__init__(expected)
        self.expected = expected


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise Unreadable("a string")


def _required_text(value: Any) -> str:
    if isinstance(value, str) and value.strip():
        return value
    raise Unreadable("a string (Azure always sends it)")


def _count(value: Any) -> int | None:
    """A node count: a JSON integer (or its digits as text)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise Unreadable("a whole number")


def _duration(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str) and _ISO_DURATION.fullmatch(value.strip().upper()):
        return duration_seconds(value)  # PT0S: none, as azure-ai-ml reads it
    raise Unreadable("an ISO 8601 duration such as PT5M")


def _flag_default_true(value: Any) -> bool:
    if value is None:
        return True  # Azure leaves enableNodePublicIp out: true
    if isinstance(value, bool):
        return value
    raise Unreadable("true or false")


def _object(value: Any) -> dict:
    if value is None or isinstance(value, dict):
        return dict(value or {})
    raise Unreadable("an object")


def subnet_id(value: Any) -> str | None:
    """AmlComputeProperties.subnet as Azure answers it: a ResourceId object `{"id": ARM id}` (the spec's shape), or the
    id as a plain string (the recorded examples of api-versions 2018-11-19 to 2021-07-01); null, `{}` or
    `{"id": null}`: no subnet. Anything else is not read as "no subnet" (that would plan a replacement)."""
    if isinstance(value, dict):
        if set(value) - {"id"} and "id" not in value:
            raise Unreadable('an ARM id, or {"id": ARM id}')
        value = value.get("id")
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    raise Unreadable('an ARM id, or {"id": ARM id}')


# How compute_values reads a REST value: stack/cluster_fields.py names one per field (`read`). Each reads every
# shape the api-versions' recorded examples show, and raises Unreadable on any other.
REST_READERS: dict[str, Callable[[Any], Any]] = {
    "as_is": lambda v: v,  # read by its row's own code (`explicit`)
    "text": _text,
    "required_text": _required_text,
    "count": _count,
    "snake": lambda v: camel_to_snake(_text(v)),  # "LowPriority" -> "low_priority", as azure-ai-ml reads it
    "duration": _duration,
    "absent_true": _flag_default_true,
    "enabled": lambda v: _text(v) == "Enabled",
    "keys": lambda v: list(_object(v)),  # userAssignedIdentities: {resource id: {...}}
    "dict": _object,
    "subnet": subnet_id,
}


# When its AmlCompute properties are null, or an operation runs on it (ARM's provisioningState: any but Succeeded,
# Failed and Canceled, https://github.com/Azure/azure-resource-manager-rpc/blob/master/v1.0/async-api-reference.md)
# and they carry no size, Azure has not reported its settings: the 2025-12-01 recorded create
# (Compute/createOrUpdate/BasicAmlCompute.json) answers `{"computeType": "AmlCompute", "provisioningState":
# "Creating"}` and nothing else, and the spec's AmlComputeProperties requires no field. No value is "always sent".
_TERMINAL_STATES = ("succeeded", "failed", "canceled")
UNREPORTED_READERS = {**REST_READERS, "required_text": _text}


def settings_reported(body: dict) -> bool:
    """Whether Azure's answer reports the compute's settings: False where its AmlCompute properties are null, or
    where an operation runs on it and they say no size yet."""
    outer = body.get("properties")
    if not isinstance(outer, dict):
        return True  # not an object: read as always, and named as unreadable
    inner = outer.get("properties")
    if inner is None:
        return False
    state = outer.get("provisioningState")
    running = isinstance(state, str) and state.strip().lower() not in _TERMINAL_STATES
    return not (running and isinstance(inner, dict) and inner.get("vmSize") in (None, ""))


def _at(body: Any, path: str) -> Any:
    """`a.b.c` of the answer; None where a step is missing or null; _Misplaced where a step that must hold an object
    holds something else (the path of that step, for the message)."""
    obj, steps = body, path.split(".")
    for i, step in enumerate(steps):
        if obj is None:
            return None
        if not isinstance(obj, dict):
            raise _Misplaced(".".join(steps[:i]), obj)
        obj = obj.get(step)
    return obj


class _Misplaced(Exception):
    """A value where an object should be, on the way to a field (`path`: up to it)."""

    def __init__(self, path: str, value: Any):
        super().__init__(path)
        self.path, self.value = path, value


def shown(value: Any, limit: int = 60) -> str:
    """A value out of Azure's answer, for a message: JSON, escaped (no control characters reach a terminal), cut."""
    text = json.dumps(value, ensure_ascii=True, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _unreadable(path: str, value: Any, expected: str) -> dict[str, str]:
    return {"path": path, "value": shown(value), "expected": expected}


def _read(body: dict, paths: tuple[str, ...], reader: Callable[[Any], Any], problems: list[dict[str, str]]) -> Any:
    """The first non-empty of `paths` (the last one's value when none is), read by `reader`; a shape it cannot read
    is noted in `problems` and read as None."""
    for path in paths:
        try:
            raw = _at(body, path)
            value = reader(raw)
        except _Misplaced as misplaced:   # noted once, however many fields sit under it
            if misplaced.path not in [p["path"] for p in problems]:
                problems.append(_unreadable(misplaced.path, misplaced.value, "an object"))
            return None
        except Unreadable as exc:
            problems.append(_unreadable(path, raw, exc.expected))
            return None
        if raw not in (None, "", {}, []):
            return value
    return value


def _first_error_code(errors: Any) -> str | None:
    """provisioningErrors: [{"error": {"code", ...}}]; azure-ai-ml keeps the first one's code."""
    if errors is None or errors == []:
        return None
    first = errors[0] if isinstance(errors, list) else None
    error = first.get("error") if isinstance(first, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(code, str):
        raise Unreadable('[{"error": {"code": ..., "message": ...}}]')
    return code


def compute_values(body: Any) -> dict[str, Any]:
    """A ComputeResource as Azure answers it -> plain values with CLI v2 YAML's field names, exactly those
    azure-ai-ml's AmlCompute._load_from_rest reads (`compute_type`: what azure-ai-ml calls the kind); the fields
    and where they sit are stack/cluster_fields.py's. `unreadable`, there only when some are, lists the values whose
    shape no reader knows ({path, value, expected}): plan stops on them (plan/kinds/cluster.py), never compares them."""
    problems: list[dict[str, str]] = []
    if not isinstance(body, dict):
        return {"name": None, "compute_type": UNSUPPORTED_COMPUTE, "unreadable": [_unreadable("", body, "an object")]}
    name = _read(body, ("name",), _text, problems)
    kind_text = _read(body, ("properties.computeType",), _text, problems)
    kind = _SDK_COMPUTE_TYPES.get(str(kind_text or "").lower(), UNSUPPORTED_COMPUTE)
    values: dict[str, Any] = {"name": name, "compute_type": kind}
    if kind == "amlcompute":
        # a Failed or stuck cluster plans as a replacement (plan/diff.py); azure-ai-ml keeps the first code
        explicit = {"provisioning_errors": _first_error_code}
        reported = settings_reported(body)
        readers = REST_READERS if reported else UNREPORTED_READERS
        values.update({f.value_key: _read(body, f.rest, readers[f.read] if f.plain(REST) else
                                          explicit[f.value_key], problems) for f in CLUSTER_FIELDS if f.rest})
        if not reported:
            values["settings_reported"] = False  # plan/kinds/cluster.py: its AmlCompute settings are unknown, not defaults
    return {**values, "unreadable": problems} if problems else values


def iso_duration(seconds: Any) -> str | None:
    """Seconds -> ISO 8601 duration as azure-ai-ml writes it (isodate: 120 -> "PT2M", 86400 -> "P1D"); none for
    none or zero, which azure-ai-ml leaves out."""
    if not seconds:
        return None
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M"), (secs, "S")) if n)
    return "P" + (f"{days}D" if days else "") + (f"T{clock}" if clock else "")


def _pascal(snake: Any) -> str | None:
    """azure-ai-ml's snake_to_pascal: "low_priority" -> "LowPriority", "system_assigned,user_assigned" ->
    "SystemAssigned,UserAssigned"."""
    if not snake:
        return None
    return ",".join("".join(w[:1].upper() + w[1:] for w in part.strip().split("_")) for part in str(snake).split(","))


# How compute_body writes a plan attribute at its row's REST path: the inverse of REST_READERS.
REST_WRITERS: dict[str, Callable[[Any], Any]] = {
    "text": lambda v: v,
    "required_text": lambda v: v,
    "count": lambda v: None if v is None else int(v),
    "snake": _pascal,
    "duration": iso_duration,
    "absent_true": lambda v: True if v is None else bool(v),
}
# azure-ai-ml's ARM id test for a subnet given whole (azure/ai/ml/_schema/_utils/utils.py validate_arm_str)
_ARM_SUBNET = re.compile(r"/subscriptions/[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}?/resourcegroups/.*"
                         r"/providers/[a-z.a-z]*/[a-z]*/.*")



def _put_path(body: dict, path: str, value: Any) -> None:
    if value is None:
        return
    *parents, leaf = path.split(".")
    for step in parents:
        body = body.setdefault(step, {})
    body[leaf] = value


def compute_body(resource: Written, secrets: Any, subnet: str | None, vnet_name: str | None, *,
                 subscription_id: str, resource_group: str, location: str) -> dict[str, Any]:
    """The ComputeResource JSON a full PUT of the cluster sends: what azure-ai-ml's AmlCompute._to_rest_object
    serialises for the same settings (tests/contract hold the two equal). Each plain row of stack/cluster_fields.py
    lands at its last REST path; `secrets` (admin_username, admin_password, ssh_key_value) only here, never in a
    plan. `location`: the workspace's, where the plan leaves it out (azure-ai-ml reads the workspace's)."""
    a = resource.attributes
    body: dict[str, Any] = {"location": location, "properties": {"computeType": "AmlCompute", "properties": {}}}
    for f in CLUSTER_FIELDS:
        if f.plain(SDK):
            _put_path(body, f.rest[-1], REST_WRITERS[f.read](a.get(f.attribute)))
    aml = body["properties"]["properties"]
    aml.setdefault("vmSize", "STANDARD_DS3_V2")   # azure-ai-ml's ComputeDefaults.VMSIZE
    aml["scaleSettings"] = {"maxNodeCount": int(a.get("max_instances") or 0),
                            "minNodeCount": int(a.get("min_instances") or 0), **aml.get("scaleSettings", {})}
    if secrets.admin_username:
        aml["userAccountCredentials"] = {k: v for k, v in (
            ("adminUserName", secrets.admin_username), ("adminUserPassword", secrets.admin_password),
            ("adminUserSshPublicKey", secrets.ssh_key_value)) if v is not None}
        public = a.get("ssh_public_access_enabled")
        aml["remoteLoginPortPublicAccess"] = "NotSpecified" if public is None else "Enabled" if public else "Disabled"
    else:
        aml["remoteLoginPortPublicAccess"] = "NotSpecified"
    body["properties"]["disableLocalAuth"] = not secrets.admin_username
    if subnet:
        whole = _ARM_SUBNET.match(subnet.lower())
        aml["subnet"] = {"id": subnet if whole and whole.group() == subnet.lower() else
                         f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/"
                         f"Microsoft.Network/virtualNetworks/{vnet_name}/subnets/{subnet}"}
    aml["osType"] = "Linux"   # what azure-ai-ml has always sent
    if a.get("identity_type"):
        identity: dict[str, Any] = {"type": _pascal(a["identity_type"])}
        if a.get("user_assigned_identities"):
            identity["userAssignedIdentities"] = {i: {} for i in a["user_assigned_identities"]}
        body["identity"] = identity
    body["tags"] = {**(a.get("tags") or {}), **resource.tags}
    return body

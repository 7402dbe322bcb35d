"""Versioned assets: environments (containers, versions, label latest, nextVersion) and code snapshots
(hash lookup, startPendingUpload to the emulator's blob endpoint, version PUT).

Environment versions are immutable as in Azure: a PUT with different content for an existing version is
refused; the same content is idempotent, and only its metadata (description, tags, isArchived, ...) changes, to
what the PUT says (a PUT replaces: a tag it leaves out is gone). Archiving is such a PUT with isArchived, of a
version or of a container (azure-ai-ml's `environments.archive`, `az ml environment archive`); lists show active
assets unless `listViewType` asks for ArchivedOnly or All (EnvironmentVersions_List, EnvironmentContainers_List
in https://github.com/Azure/azure-rest-api-specs, specification/machinelearningservices), while a GET by name
still answers an archived one.
"""

from __future__ import annotations

import uuid

from infra_cli.emulator.service import EmulatedService, Scope
from infra_cli.emulator.auth import UPLOAD
from infra_cli.emulator.blobs import blob_url
from infra_cli.emulator.wire import ArmError, Request, Response, json_response, not_found, system_data, utc_now_iso

# Metadata a registered version may change; everything else in properties is its content.
_MUTABLE = {"description", "tags", "properties", "isArchived", "stage", "autoDeleteSetting", "provisioningState"}
_KINDS = {"environments": ("environment", "Environment"), "codes": ("code", "Code")}


def _container_type(kind: str) -> str:
    return _KINDS[kind][0]


def _version_type(kind: str) -> str:
    return _KINDS[kind][0] + "_version"


def _versions(service: EmulatedService, scope: Scope, kind: str, name: str) -> list[dict]:
    return [r.body for r in service.store.rows(_version_type(kind), scope.key, name)]


_VIEWS = {"activeonly": (False,), "archivedonly": (True,), "all": (False, True)}


def _in_view(req: Request, body: dict | None) -> bool:
    """Whether a list answer shows this asset: ActiveOnly unless the request's listViewType says otherwise."""
    view = _VIEWS.get(req.query.get("listviewtype", "ActiveOnly").lower())
    if view is None:
        raise ArmError(400, "UserError", f"listViewType {req.query['listviewtype']!r} is not one of ActiveOnly, "
                       "ArchivedOnly, All.", target="listViewType")
    return bool(((body or {}).get("properties") or {}).get("isArchived")) in view


def _next_version(versions: list[dict]) -> str:
    numeric = [int(v["name"]) for v in versions if v["name"].isdigit()]
    return str(max(numeric) + 1) if numeric else "1"


def _container_body(service: EmulatedService, scope: Scope, kind: str, name: str) -> dict | None:
    versions = _versions(service, scope, kind, name)
    stored = service.store.get(_container_type(kind), scope.key, name)
    if stored is None and not versions:
        return None
    stored = stored or {}
    latest = versions[-1]["name"] if versions else None
    props = {"isArchived": False, **(stored.get("properties") or {}), "latestVersion": latest,
             "nextVersion": _next_version(versions)}
    return {"id": f"{scope.arm_id}/{kind}/{stored.get('name', name)}", "name": stored.get("name", name),
            "type": f"Microsoft.MachineLearningServices/workspaces/{kind}",
            "systemData": stored.get("systemData") or (versions[0].get("systemData") if versions else None),
            "properties": props}


def list_containers(service: EmulatedService, req: Request, scope: Scope, kind: str) -> Response:
    service.workspace(scope)
    names = []
    for row in service.store.rows(_version_type(kind), scope.key):
        if row.name not in names:
            names.append(row.name)
    bodies = [_container_body(service, scope, kind, n) for n in names]
    return json_response(200, service.page(req, [b for b in bodies if b is not None and _in_view(req, b)]))


def get_container(service: EmulatedService, req: Request, scope: Scope, kind: str, name: str) -> Response:
    service.workspace(scope)
    body = _container_body(service, scope, kind, name)
    if body is None:
        raise not_found(_KINDS[kind][1].lower(), name, scope.workspace)
    return json_response(200, body)


def put_container(service: EmulatedService, req: Request, scope: Scope, kind: str, name: str) -> Response:
    service.workspace(scope)
    service.check_name(_container_type(kind), name)
    request = req.json()
    body = {"name": name, "systemData": system_data(utc_now_iso()),
            "properties": {k: v for k, v in (request.get("properties") or {}).items()
                           if k in ("description", "tags", "isArchived")}}
    service.store.put(_container_type(kind), scope.key, name, body)
    return json_response(200, _container_body(service, scope, kind, name))


def list_versions(service: EmulatedService, req: Request, scope: Scope, kind: str, name: str) -> Response:
    service.workspace(scope)
    if req.query.get("hash"):
        # A content-hash lookup searches the whole workspace: the SDK names each new snapshot afresh
        # and reuses whichever registered snapshot has the same content.
        every = [r.body for r in service.store.rows(_version_type(kind), scope.key)]
        versions = [v for v in every if _hash_of(v) == req.query["hash"]]
    else:
        versions = [v for v in _versions(service, scope, kind, name) if _in_view(req, v)]
    if "desc" in req.query.get("$orderby", "").lower():
        versions = list(reversed(versions))
    top = req.query.get("$top")
    if top:
        versions = versions[: int(top)]
    return json_response(200, service.page(req, versions))


def get_version(service: EmulatedService, req: Request, scope: Scope, kind: str, name: str, version: str) -> Response:
    service.workspace(scope)
    body = service.store.get(_version_type(kind), scope.key, name, version)
    if body is None:
        raise not_found(f"{_KINDS[kind][1].lower()} version", f"{name}:{version}", scope.workspace)
    return json_response(200, body)


def put_version(service: EmulatedService, req: Request, scope: Scope, kind: str, name: str, version: str) -> Response:
    service.workspace(scope)
    service.check_name(_container_type(kind), name)
    service.check_name("version", version)
    request = req.json()
    props = dict(request.get("properties") or {})
    if kind == "environments" and not (props.get("image") or props.get("build")):
        raise ArmError(400, "UserError", "An environment version needs an image or a build context.",
                       target="properties.image")
    if kind == "codes" and not props.get("codeUri"):
        raise ArmError(400, "UserError", "A code version needs a codeUri.", target="properties.codeUri")
    with service.store.lock:
        existing = service.store.get(_version_type(kind), scope.key, name, version)
        if existing is not None:
            if _content(existing["properties"]) != _content(props):
                raise ArmError(409, "UserError", f"{_KINDS[kind][1]} {name} with version {version} is already "
                               "registered and cannot be changed. Register the new content as a new version.")
            # a PUT replaces the metadata: what it leaves out is gone (the server's provisioningState stays)
            kept = {k: v for k, v in existing["properties"].items() if k not in _MUTABLE or k == "provisioningState"}
            body = {**existing, "properties": {**kept, "isArchived": False, "tags": {},
                                               **{k: v for k, v in props.items() if k in _MUTABLE},
                                               "provisioningState": existing["properties"].get("provisioningState")}}
            status = 200
        else:
            now = utc_now_iso()
            defaults = {"environmentType": "UserCreated", "osType": "Linux"} if kind == "environments" else {}
            body = {"id": f"{scope.arm_id}/{kind}/{name}/versions/{version}", "name": version,
                    "type": f"Microsoft.MachineLearningServices/workspaces/{kind}/versions",
                    "systemData": system_data(now),
                    "properties": {**defaults, **props, "provisioningState": "Succeeded", "isArchived": False}}
            status = 201
        service.store.put(_version_type(kind), scope.key, name, body, version)
    return json_response(status, body)


def _content(props: dict) -> dict:
    defaults = {"environmentType": "UserCreated", "osType": "Linux"}
    return {k: v for k, v in {**defaults, **props}.items() if k not in _MUTABLE and v not in (None, "", {}, [])}


def _hash_of(version_body: dict) -> str | None:
    # The SDK names an anonymous code snapshot after its content hash; it may also send the hash as a property.
    props = version_body.get("properties") or {}
    return (props.get("properties") or {}).get("hash_sha256") or props.get("contentHash") \
        or version_body["id"].split("/codes/")[-1].split("/")[0]


def start_pending_upload(service: EmulatedService, req: Request, scope: Scope, kind: str, name: str,
                         version: str) -> Response:
    service.workspace(scope)
    container = f"upload-{uuid.uuid4().hex[:20]}"
    url = blob_url(service.base_url, container)
    return json_response(200, {
        "pendingUploadId": uuid.uuid4().hex, "pendingUploadType": "TemporaryBlobReference",
        "blobReferenceForConsumption": {
            "blobUri": url, "storageAccountArmId": None,
            "credential": {"credentialType": "SAS",
                           "sasUri": service.blobs.sas_url(service.base_url, container, permissions=UPLOAD)}}})

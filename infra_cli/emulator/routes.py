"""URL patterns -> handlers. Every route needs the emulator's token (emulator/auth.py; the blob routes take a SAS
the emulator issued instead); management-plane routes also need an api-version, and are where faults are
injected; the blob and discovery endpoints are data-plane."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable
from urllib.parse import unquote

from infra_cli.emulator import auth, compute_rp, ml_assets, ml_computes, ml_jobs, ml_registry, ml_workspace
from infra_cli.emulator.service import EmulatedService, Scope
from infra_cli.emulator.blobs import ACCOUNT
from infra_cli.emulator.wire import ArmError, Request, Response

Handler = Callable[..., Response]

_NAME = r"[^/]+"
_W = (rf"/subscriptions/(?P<sub>{_NAME})/resourceGroups/(?P<rg>{_NAME})"
      rf"/providers/Microsoft\.MachineLearningServices/workspaces/(?P<ws>{_NAME})")
_ML_LOC = rf"/subscriptions/(?P<subscription>{_NAME})/providers/Microsoft\.MachineLearningServices/locations/(?P<location>{_NAME})"
_ASSET = r"(?P<kind>environments|codes)"
_HISTORY = r"/history/v1\.0" + _W
_EXPERIMENT = rf"(?:/experiments/(?P<experiment>{_NAME}))?"


@dataclass(frozen=True)
class Route:
    method: str
    source: str          # the path's regular expression, compiled on first use (pattern)
    handler: Handler
    management: bool     # faults injected
    api_version: bool    # ARM requires ?api-version=
    # (request, path arguments, token) -> True if the request carries a link the emulator signed, which stands
    # in for the token: SAS on the blob endpoint, the signed discovery link
    signed_link: Callable[[Request, dict, str], bool] | None = None

    @property
    def pattern(self) -> re.Pattern:
        return _compiled(self.source)


@functools.lru_cache(maxsize=None)
def _compiled(source: str) -> re.Pattern:
    """Compiled when a request first tries the route: compiling all 40 was a tenth of the emulator's start, and a
    `--local` command reaches a few of them."""
    return re.compile(f"^{source}$", re.IGNORECASE)


def _route(method: str, pattern: str, handler: Handler, *, management: bool = True, api_version: bool = True,
           signed_link: Callable[[Request, dict, str], bool] | None = None) -> Route:
    return Route(method, pattern, handler, management, api_version, signed_link)


def _blob_sas(req: Request, args: dict, token: str) -> bool:
    return auth.sas_allows(req.query, token, req.method, args["container"], args.get("blob"))


def _discovery_link(req: Request, args: dict, token: str) -> bool:
    return auth.signed_link_allows(req.query, token, "discovery", args["workspace_id"])


def blob_handler(service: EmulatedService, req: Request, container: str, blob: str | None = None) -> Response:
    return service.blobs.handle(req, container, blob)


ROUTES: tuple[Route, ...] = (
    _route("GET", _W, ml_workspace.get_workspace),
    _route("PUT", _W, ml_workspace.put_workspace),
    _route("GET", _W + "/computes", ml_computes.list_computes),
    _route("GET", _W + rf"/computes/(?P<name>{_NAME})", ml_computes.get_compute),
    _route("PUT", _W + rf"/computes/(?P<name>{_NAME})", ml_computes.put_compute),
    _route("PATCH", _W + rf"/computes/(?P<name>{_NAME})", ml_computes.patch_compute),
    _route("DELETE", _W + rf"/computes/(?P<name>{_NAME})", ml_computes.delete_compute),
    _route("GET", _W + "/" + _ASSET, ml_assets.list_containers),
    _route("GET", _W + "/" + _ASSET + rf"/(?P<name>{_NAME})", ml_assets.get_container),
    _route("PUT", _W + "/" + _ASSET + rf"/(?P<name>{_NAME})", ml_assets.put_container),
    _route("GET", _W + "/" + _ASSET + rf"/(?P<name>{_NAME})/versions", ml_assets.list_versions),
    _route("GET", _W + "/" + _ASSET + rf"/(?P<name>{_NAME})/versions/(?P<version>{_NAME})", ml_assets.get_version),
    _route("PUT", _W + "/" + _ASSET + rf"/(?P<name>{_NAME})/versions/(?P<version>{_NAME})", ml_assets.put_version),
    _route("POST", _W + "/" + _ASSET + rf"/(?P<name>{_NAME})/versions/(?P<version>{_NAME})/startPendingUpload",
           ml_assets.start_pending_upload),
    _route("GET", _W + "/jobs", ml_jobs.list_jobs),
    _route("GET", _W + rf"/jobs/(?P<name>{_NAME})", ml_jobs.get_job),
    _route("PUT", _W + rf"/jobs/(?P<name>{_NAME})", ml_jobs.put_job),
    _route("POST", _W + rf"/jobs/(?P<name>{_NAME})/cancel", ml_jobs.cancel_job),
    _route("GET", _W + rf"/jobs/(?P<name>{_NAME})/cancelStatus", ml_jobs.cancel_status),
    _route("GET", _W + "/datastores", ml_workspace.list_datastores),
    _route("GET", _W + rf"/datastores/(?P<name>{_NAME})", ml_workspace.get_datastore),
    _route("GET", _ML_LOC + "/vmSizes", compute_rp.ml_vm_sizes),
    _route("GET", _ML_LOC + "/usages", compute_rp.ml_usages),
    _route("GET", _ML_LOC + rf"/computeOperationsStatus/(?P<op_id>{_NAME})", compute_rp.operation_status),
    _route("GET", rf"/subscriptions/(?P<subscription>{_NAME})/providers/Microsoft\.Compute/skus",
           compute_rp.resource_skus),
    _route("GET", rf"/subscriptions/(?P<subscription>{_NAME})/providers/Microsoft\.Compute/locations/(?P<location>{_NAME})/usages",
           compute_rp.compute_usages),
    _route("GET", _HISTORY + _EXPERIMENT + rf"/runs/(?P<run_id>{_NAME})/details", ml_jobs.run_details, api_version=False),
    _route("GET", _HISTORY + _EXPERIMENT + rf"/runs/(?P<run_id>{_NAME})", ml_jobs.get_run, api_version=False),
    _route("POST", _HISTORY + "/rundata", ml_jobs.run_data, api_version=False),
    _route("GET", rf"/discovery/workspaces/(?P<workspace_id>{_NAME})", ml_workspace.get_discovery,
           management=False, api_version=False, signed_link=_discovery_link),
    *(_route(m, rf"/{ACCOUNT}/(?P<container>{_NAME})(?:/(?P<blob>.+))?", blob_handler, management=False, api_version=False,
             signed_link=_blob_sas)
      for m in ("GET", "HEAD", "PUT", "DELETE")),
    *(_route(m, p, h, management=mgmt) for m, p, h, mgmt in ml_registry.ROUTE_TABLE),
)


def match(method: str, path: str) -> tuple[Route, dict]:
    """The route and its arguments for a request; ArmError 404/405 when none."""
    path = path.rstrip("/") or "/"
    allowed: list[str] = []
    for route in ROUTES:
        found = route.pattern.match(path)
        if not found:
            continue
        if route.method != method:
            allowed.append(route.method)
            continue
        return route, _arguments(found.groupdict())
    if allowed:
        # HTTP requires a 405 to say what is allowed (RFC 9110, 15.5.6)
        methods = ", ".join(sorted(set(allowed)))
        raise ArmError(405, "MethodNotAllowed", f"The emulator does not allow {method} on {path}; it allows {methods}.",
                       headers={"Allow": methods})
    raise ArmError(404, "NoRegisteredProviderFound", f"The emulator does not serve {method} {path}.")


def _arguments(groups: dict) -> dict:
    args = {k: unquote(v) if isinstance(v, str) else v for k, v in groups.items()}
    if "ws" in args:
        args["scope"] = Scope(args.pop("sub"), args.pop("rg"), args.pop("ws"))
    if "kind" in args:
        args["kind"] = args["kind"].lower()
    return args

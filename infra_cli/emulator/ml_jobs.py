"""Command jobs (PUT, GET, list, cancel) and the run-history calls `jobs.stream` and `jobs.download` make
(run details with log URLs, run data). Jobs run on this machine: see runner.py."""

from __future__ import annotations

import copy
import re
import time
from urllib.parse import quote

from infra_cli.emulator.service import EmulatedService, Scope
from infra_cli.emulator.ml_registry import check_job_environment
from infra_cli.emulator.ml_workspace import artifact_container
from infra_cli.emulator.runner import TERMINAL, job_prefix, runner_identity
from infra_cli.emulator.wire import (ArmError, Request, Response, json_response, not_found, public, system_data,
                                    utc_now_iso)

TYPE = "job"


def _job(service: EmulatedService, scope: Scope, name: str) -> dict:
    service.workspace(scope)
    body = service.store.get(TYPE, scope.key, name)
    if body is None:
        raise not_found("job", name, scope.workspace)
    return body


def get_job(service: EmulatedService, req: Request, scope: Scope, name: str) -> Response:
    return json_response(200, public(_job(service, scope, name)))


def list_jobs(service: EmulatedService, req: Request, scope: Scope) -> Response:
    service.workspace(scope)
    jobs = [public(r.body) for r in reversed(service.store.rows(TYPE, scope.key))]
    return json_response(200, service.page(req, jobs))


def put_job(service: EmulatedService, req: Request, scope: Scope, name: str) -> Response:
    service.workspace(scope)
    service.check_name("job", name)
    request = req.json()
    props = dict(request.get("properties") or {})
    with service.store.lock:
        existing = service.store.get(TYPE, scope.key, name)
        if existing is not None:
            # A submitted job cannot be submitted again; only its description and tags change.
            updated = copy.deepcopy(existing)
            for key in ("description", "tags"):
                if key in props:
                    updated["properties"][key] = props[key]
            service.store.put(TYPE, scope.key, name, updated)
            return json_response(200, public(updated))
        _check_job(service, scope, props)
        props.update({
            "status": "NotStarted", "experimentName": props.get("experimentName") or "Default",
            "displayName": props.get("displayName") or name, "isArchived": False,
            "services": {"Studio": {"jobServiceType": "Studio",
                                    "endpoint": f"{service.base_url}studio/runs/{quote(name)}"},
                         "Tracking": {"jobServiceType": "Tracking", "endpoint": service.base_url}},
        })
        body = {"id": f"{scope.arm_id}/jobs/{name}", "name": name,
                "type": "Microsoft.MachineLearningServices/workspaces/jobs", "systemData": system_data(utc_now_iso()),
                "properties": props,
                # The process that runs it: another emulator over the same state must leave the job alone.
                "_private": {"submittedAt": time.time(), "runner": runner_identity()}}
        service.store.put(TYPE, scope.key, name, body)
    assert service.runner is not None       # the server sets it before it answers a request
    service.runner.submit(scope, name)
    return json_response(201, public(body))


def _check_job(service: EmulatedService, scope: Scope, props: dict) -> None:
    if props.get("jobType") != "Command":
        raise ArmError(400, "UserError", f"jobType {props.get('jobType')!r} is not supported by the emulator: "
                       "only Command jobs run locally.", target="jobType")
    if not props.get("command"):
        raise ArmError(400, "UserError", "A command job needs a command.", target="command")
    compute_id = props.get("computeId")
    # azure-ai-ml sends compute="serverless" as is (SERVERLESS_COMPUTE), which Azure ML reads as no compute
    if not compute_id or compute_id.rstrip("/").split("/")[-1] == "serverless":
        _check_serverless(props)   # no compute: Azure ML's serverless compute runs it
    else:
        _check_compute(service, scope, props, compute_id)
    code_id = props.get("codeId")
    if code_id:
        parts = code_id.rstrip("/").split("/")
        if len(parts) < 4 or service.store.get("code_version", scope.key, parts[-3], parts[-1]) is None:
            raise ArmError(400, "UserError", f"Code asset {code_id} was not found.", target="codeId")
    env_id = props.get("environmentId") or ""
    if "/workspaces/" in env_id and "/environments/" in env_id:
        parts = env_id.rstrip("/").split("/")
        if service.store.get("environment_version", scope.key, parts[-3], parts[-1]) is None:
            raise ArmError(400, "UserError", f"Environment {parts[-3]}:{parts[-1]} was not found.",
                           target="environmentId")
    check_job_environment(env_id)  # a registry or curated environment must exist too


def _check_compute(service: EmulatedService, scope: Scope, props: dict, compute_id: str) -> None:
    compute_name = compute_id.rstrip("/").split("/")[-1]
    compute = service.store.get("compute", scope.key, compute_name)
    if compute is None or compute["properties"].get("provisioningState") not in ("Succeeded", "Updating"):
        state = "does not exist" if compute is None else f"is {compute['properties'].get('provisioningState')}"
        raise ArmError(400, "UserError", f"Compute '{compute_name}' {state} in workspace '{scope.workspace}'.",
                       target="computeId")
    if compute["properties"].get("computeType") == "Kubernetes":
        return   # an attached Kubernetes cluster: its nodes are its own (instance types, not a node count)
    max_nodes = int(compute["properties"]["properties"].get("scaleSettings", {}).get("maxNodeCount", 0))
    wanted = int((props.get("resources") or {}).get("instanceCount") or 1)
    if wanted > max_nodes:
        raise ArmError(400, "UserError", f"The job asks for {wanted} instances but compute '{compute_name}' has at "
                       f"most {max_nodes} nodes.", target="resources.instanceCount")


# Serverless compute (https://learn.microsoft.com/azure/machine-learning/how-to-use-serverless-compute): a job
# with no computeId runs on nodes Azure ML creates for it, of resources.instanceType (Azure picks one when absent),
# in queueSettings.jobTier's tier. Here its nodes are local processes, as a cluster's are.
_JOB_TIERS = ("null", "spot", "basic", "standard", "premium")


def _check_serverless(props: dict) -> None:
    size = (props.get("resources") or {}).get("instanceType")
    if size is not None and not (isinstance(size, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{1,63}", size)):
        raise ArmError(400, "UserError", f"instanceType {size!r} is not a VM size serverless compute offers.",
                       target="resources.instanceType")
    tier = (props.get("queueSettings") or {}).get("jobTier")
    if tier is not None and str(tier).lower() not in _JOB_TIERS:
        raise ArmError(400, "UserError", f"jobTier {tier!r} is not one of {', '.join(_JOB_TIERS)}.",
                       target="queueSettings.jobTier")


def cancel_job(service: EmulatedService, req: Request, scope: Scope, name: str) -> Response:
    body = _job(service, scope, name)
    if body["properties"].get("status") not in TERMINAL:
        assert service.runner is not None   # the server sets it before it answers a request
        service.runner.cancel(scope, name)
        with service.store.lock:
            current = service.store.get(TYPE, scope.key, name)
            # None: deleted since _job read it, and a deleted job has nothing left to mark
            if current is not None and current["properties"].get("status") not in TERMINAL:
                current["properties"]["status"] = "CancelRequested"
                service.store.put(TYPE, scope.key, name, current)
    # The cancel is accepted at once; the job reaches Canceled when its processes are gone.
    api_version = quote(req.query.get("api-version", "2023-02-01-preview"))
    location = f"{service.base_url.rstrip('/')}{req.path.rsplit('/cancel', 1)[0]}/cancelStatus?api-version={api_version}"
    return Response(202, b"", {"Location": location})


def cancel_status(service: EmulatedService, req: Request, scope: Scope, name: str) -> Response:
    status = _job(service, scope, name)["properties"].get("status")
    return Response(200 if status in TERMINAL else 202, b"", {} if status in TERMINAL else {"Retry-After": "1"})


# run history (the workspace's "api" service from the discovery document)
def _run_details(service: EmulatedService, scope: Scope, name: str) -> dict:
    body = _job(service, scope, name)
    private = body.get("_private") or {}
    container = artifact_container(service.workspace(scope))
    prefix = job_prefix(body["name"])
    logs = {n[len(prefix):]: service.blobs.sas_url(service.base_url, container, n)
            for n in service.blobs.names(container, prefix)
            if n[len(prefix):].startswith(("user_logs/", "system_logs/"))}
    props = body["properties"]
    details = {"runId": body["name"], "runUuid": None, "target": (props.get("computeId") or "").split("/")[-1],
               "status": props.get("status"), "startTimeUtc": private.get("startTimeUtc"),
               "endTimeUtc": private.get("endTimeUtc"), "logFiles": logs, "warnings": [],
               "properties": props.get("properties") or {}, "tags": props.get("tags") or {},
               "inputDatasets": [], "outputDatasets": [], "runDefinition": None}
    if private.get("error"):
        details["error"] = {"error": private["error"]}
    return details


def run_details(service: EmulatedService, req: Request, scope: Scope, run_id: str, experiment: str | None = None) -> Response:
    return json_response(200, _run_details(service, scope, run_id))


def get_run(service: EmulatedService, req: Request, scope: Scope, run_id: str, experiment: str | None = None) -> Response:
    details = _run_details(service, scope, run_id)
    body = _job(service, scope, run_id)
    return json_response(200, {**{k: details[k] for k in ("runId", "status", "startTimeUtc", "endTimeUtc",
                                                          "target", "properties", "tags")},
                               "experimentId": body["properties"].get("experimentName"),
                               "runType": "azureml.scriptrun", "outputs": {}, "inputs": {}})


def run_data(service: EmulatedService, req: Request, scope: Scope) -> Response:
    run_id = req.json().get("runId") or ""
    details = _run_details(service, scope, run_id)
    metadata = {k: details[k] for k in ("runId", "status", "startTimeUtc", "endTimeUtc", "target", "properties", "tags")}
    return json_response(200, {"runMetadata": {**metadata, "outputs": {}, "inputs": {}}})

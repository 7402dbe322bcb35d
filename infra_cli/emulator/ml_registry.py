"""Azure ML registries: the discovery endpoint and a registry's environments, read-only.

azure-ai-ml reaches a registry in two steps (azure/ai/ml/_utils/_registry_utils.py): it asks the cloud's
`registry_discovery_endpoint` where the registry lives (GET /registrymanagement/v1.0/registries/R/discovery),
then reads assets from `primaryRegionResourceProviderUri` + "mferp/managementfrontend" with the registry
data-plane api-version. The emulator serves the `azureml` registry with the curated environments of
validators/curated_environments.yaml (`registry:`): versions 1..latest, label latest = the highest.
"""

from __future__ import annotations

from infra_cli.emulator.service import EmulatedService
from infra_cli.emulator.wire import ArmError, Request, Response, json_response
from infra_cli.knowledge.curated import (RegistryEnvironment, curated_registries, parse_environment_reference,
                                         registry_environment, resolve_registry_environment)

# Where the registries of the emulated world live (Azure answers the subscription and group that own them).
REGISTRY_SUBSCRIPTION = "00000000-0000-0000-0000-00000000a2e1"
REGISTRY_RESOURCE_GROUP = "registry-builtin"
MFE_PREFIX = "/mferp/managementfrontend"
# The registry's version timestamps: curated versions predate anything a user registers.
_CREATED = "2024-01-01T00:00:00.000Z"


def _environments(registry: str) -> dict[str, RegistryEnvironment]:
    rows = curated_registries().get(registry.lower())
    if rows is None:
        raise ArmError(404, "ResourceNotFound", f"The registry '{registry}' was not found.")
    return {r.name.lower(): r for r in rows}


def _environment(registry: str, name: str) -> RegistryEnvironment:
    _environments(registry)  # 404 for a registry the world does not have
    found = registry_environment(registry, name)  # its name or an alias (AzureML-NAME)
    if found is None:
        raise ArmError(404, "ResourceNotFound", f"The environment '{name}' was not found in registry '{registry}'.")
    return found


def _check_home(subscription: str, resource_group: str, registry: str) -> None:
    if subscription != REGISTRY_SUBSCRIPTION or resource_group.lower() != REGISTRY_RESOURCE_GROUP:
        raise ArmError(404, "ResourceNotFound", f"The registry '{registry}' was not found under subscription "
                       f"'{subscription}' resource group '{resource_group}'.")


def _system_data() -> dict:
    return {"createdAt": _CREATED, "createdBy": "azureml", "createdByType": "Application",
            "lastModifiedAt": _CREATED, "lastModifiedBy": "azureml", "lastModifiedByType": "Application"}


def _version_body(registry: str, env: RegistryEnvironment, version: int) -> dict:
    return {
        # a registry asset's id is its azureml:// URI (azure-ai-ml parses name and version out of it)
        "id": f"azureml://registries/{registry}/environments/{env.name}/versions/{version}", "name": str(version),
        "type": "Microsoft.MachineLearningServices/registries/environments/versions",
        "systemData": _system_data(),
        "properties": {"image": env.image.format(version=version), "environmentType": "Curated", "osType": "Linux",
                       "isAnonymous": False, "isArchived": False, "provisioningState": "Succeeded",
                       "description": f"Curated environment {env.name}, version {version}",
                       "tags": {}, "properties": {}},
    }


def _container_body(registry: str, env: RegistryEnvironment) -> dict:
    return {"id": f"azureml://registries/{registry}/environments/{env.name}", "name": env.name,
            "type": "Microsoft.MachineLearningServices/registries/environments", "systemData": _system_data(),
            "properties": {"latestVersion": str(env.latest), "nextVersion": str(env.latest + 1),
                           "isArchived": False, "description": None, "tags": {}, "properties": {}}}


def discovery(service: EmulatedService, req: Request, registry: str) -> Response:
    _environments(registry)  # 404 for a registry the world does not have
    return json_response(200, {
        "registryName": registry, "tenantId": "00000000-0000-0000-0000-000000000000",
        "primaryRegion": "eastus", "regions": ["eastus"], "subscriptionId": REGISTRY_SUBSCRIPTION,
        "resourceGroup": REGISTRY_RESOURCE_GROUP, "workspaceName": None,
        "primaryRegionResourceProviderUri": service.base_url,
        "registryFqdns": {"eastus": {"primary": service.base_url}},
    })


def list_environments(service: EmulatedService, req: Request, subscription: str, resource_group: str,
                      registry: str) -> Response:
    _check_home(subscription, resource_group, registry)
    bodies = [_container_body(registry, env) for env in _environments(registry).values()]
    return json_response(200, service.page(req, bodies))


def get_environment(service: EmulatedService, req: Request, subscription: str, resource_group: str, registry: str,
                    name: str) -> Response:
    _check_home(subscription, resource_group, registry)
    return json_response(200, _container_body(registry, _environment(registry, name)))


def list_versions(service: EmulatedService, req: Request, subscription: str, resource_group: str, registry: str,
                  name: str) -> Response:
    _check_home(subscription, resource_group, registry)
    env = _environment(registry, name)
    versions = list(range(1, env.latest + 1))
    if "desc" in req.query.get("$orderby", "").lower():  # createdtime desc: newest first
        versions.reverse()
    top = req.query.get("$top")
    if top and top.isdigit():
        versions = versions[: int(top)]
    return json_response(200, service.page(req, [_version_body(registry, env, v) for v in versions]))


def get_version(service: EmulatedService, req: Request, subscription: str, resource_group: str, registry: str,
                name: str, version: str) -> Response:
    _check_home(subscription, resource_group, registry)
    env = _environment(registry, name)
    if not version.isdigit() or not 1 <= int(version) <= env.latest:
        raise ArmError(404, "ResourceNotFound", f"The environment version '{name}:{version}' was not found in "
                       f"registry '{registry}' (it has versions 1 to {env.latest}).")
    return json_response(200, _version_body(registry, env, int(version)))


def check_job_environment(environment_id: str) -> None:
    """A job's environmentId that names a registry environment (azureml://registries/R/environments/N/versions/V
    or /labels/L) or a curated one (azureml:AzureML-N@latest, azureml:AzureML-N:V) must exist, as Azure refuses
    a job whose environment does not; workspace environments are the caller's to check."""
    if not environment_id.startswith(("azureml://registries/", "azureml:", "AzureML-")) or "/workspaces/" in environment_id:
        return
    ref = parse_environment_reference(environment_id)
    if ref.registry is None:
        return
    # a curated name in its legacy form (AzureML-acpt-...) means the registry's acpt-... (registry_name_forms)
    env = resolve_registry_environment(ref.registry, ref.name) if ref.registry.lower() in curated_registries() else None
    if env is None:
        try:
            env = _environment(ref.registry, ref.name)
        except ArmError as exc:
            raise ArmError(400, "UserError", f"Environment {environment_id} was not found: {exc.message}",
                           target="environmentId") from None
    if ref.version is not None and not (ref.version.isdigit() and 1 <= int(ref.version) <= env.latest):
        raise ArmError(400, "UserError", f"Environment {environment_id} was not found: registry '{ref.registry}' has "
                       f"versions 1 to {env.latest} of '{env.name}'.", target="environmentId")
    if ref.label is not None and ref.label != "latest":
        raise ArmError(400, "UserError", f"Environment {environment_id} was not found: label '{ref.label}' is not "
                       f"defined for '{env.name}' (only 'latest').", target="environmentId")


_NAME = r"[^/]+"
_REGISTRY = (rf"{MFE_PREFIX}/subscriptions/(?P<subscription>{_NAME})/resourceGroups/(?P<resource_group>{_NAME})"
             rf"/providers/Microsoft\.MachineLearningServices/registries/(?P<registry>{_NAME})")
# (method, path pattern, handler, management): routes.py registers them. Discovery is the data plane.
ROUTE_TABLE = (
    ("GET", rf"/registrymanagement/v1\.0/registries/(?P<registry>{_NAME})/discovery", discovery, False),
    ("GET", _REGISTRY + "/environments", list_environments, True),
    ("GET", _REGISTRY + rf"/environments/(?P<name>{_NAME})", get_environment, True),
    ("GET", _REGISTRY + rf"/environments/(?P<name>{_NAME})/versions", list_versions, True),
    ("GET", _REGISTRY + rf"/environments/(?P<name>{_NAME})/versions/(?P<version>{_NAME})", get_version, True),
)

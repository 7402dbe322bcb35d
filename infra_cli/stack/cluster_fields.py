"""The one table of a cluster's fields: stack field -> Azure's REST property -> azure-ai-ml keyword -> how it is
compared -> how `infra render` writes it. Adding a plain field is one row here (and its update semantics in
validators/update_semantics.yaml); see docs/ARCHITECTURE.md, "How to add... a cluster field".

Who reads it (each for the rows that are plain for it; a row names the stages whose code handles it instead):
    desired  plan/kinds/cluster.py cluster_attributes  stack value -> normaliser -> plan attribute
    live     plan/kinds/cluster.py cluster_resource    compute_values' value -> normaliser -> plan attribute
    rest     azure/compute_codec.py compute_values ComputeResource JSON at `rest` -> reader -> value
    sdk      azure/compute_codec.py compute_body   plan attribute -> AmlCompute(`sdk`=...)
    render   apply/files.py compute_document       stack value -> amlCompute CLI v2 YAML (`render` says when)

Field names are amlCompute's in Azure ML CLI v2 YAML (https://learn.microsoft.com/azure/machine-learning/reference-yaml-compute-aml),
REST paths are ComputeResource's in Azure's REST specification
(https://github.com/Azure/azure-rest-api-specs, specification/machinelearningservices, Compute).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from infra_cli.knowledge.size_name import parse_size_name
from infra_cli.knowledge.skus import load_catalog

DESIRED, LIVE, REST, SDK, RENDER = "desired", "live", "rest", "sdk", "render"
# render: when compute_document writes the stack value under its stack path
RENDER_KINDS = ("always", "if_set", "if_given", "section", "never")  # if_set: truthy; if_given: not None;
# section: the whole top-level section of the path as written (model_dump); never: not an amlCompute field


@dataclass(frozen=True)
class ClusterField:
    attribute: str                # the plan's attribute (desired, live, the diff, update_semantics.yaml)
    stack: str | None             # dotted path in stack.cluster.Cluster (= CLI v2 YAML); None: not in the stack
    rest: tuple[str, ...] = ()    # dotted paths in ComputeResource JSON, the first non-empty wins; (): not on Azure
    read: str = "text"            # how compute_values reads the REST value (azure/compute_codec.py REST_READERS)
    value: str | None = None      # compute_values' key (azure-ai-ml's AmlCompute name); None: the attribute
    sdk: str | None = None        # the AmlCompute keyword that carries it
    normalise: str = "as_is"      # NORMALISERS: brings a stack or a live value to the compared form
    render: str = "never"         # RENDER_KINDS
    compared: bool = True         # False: live state judged by cluster_provisioning, not a field the diff compares
    explicit: tuple[str, ...] = ()  # the stages whose own code handles it (composite fields)
    note: str = ""                # why those stages need code

    @property
    def value_key(self) -> str:
        return self.value or self.attribute

    def plain(self, stage: str) -> bool:
        """Read through the table (not explicit code) at `stage`."""
        if stage in self.explicit:
            return False
        return {DESIRED: self.stack is not None, LIVE: True, REST: bool(self.rest), SDK: self.sdk is not None,
                RENDER: self.render != "never"}[stage]


_P = "properties.properties."  # an AmlCompute's own properties inside the ComputeResource
CLUSTER_FIELDS: tuple[ClusterField, ...] = (
    ClusterField("size", "size", (_P + "vmSize",), read="required_text", sdk="size", normalise="size",
                 render="always"),
    ClusterField("tier", "tier", (_P + "vmPriority",), read="snake", sdk="tier", normalise="tier", render="always"),
    ClusterField("min_instances", "min_instances", (_P + "scaleSettings.minNodeCount",), read="count",
                 sdk="min_instances", normalise="count", render="always"),
    ClusterField("max_instances", "max_instances", (_P + "scaleSettings.maxNodeCount",), read="count",
                 sdk="max_instances", normalise="count", render="always"),
    ClusterField("idle_time_before_scale_down", "idle_time_before_scale_down",
                 (_P + "scaleSettings.nodeIdleTimeBeforeScaleDown",), read="duration",
                 sdk="idle_time_before_scale_down", normalise="seconds", render="always"),
    ClusterField("enable_node_public_ip", "enable_node_public_ip", (_P + "enableNodePublicIp",), read="absent_true",
                 sdk="enable_node_public_ip", normalise="flag_default_true", render="always"),
    ClusterField("ssh_public_access_enabled", "ssh_public_access_enabled", (_P + "remoteLoginPortPublicAccess",),
                 read="enabled", sdk="ssh_public_access_enabled", normalise="flag", render="if_given",
                 explicit=(DESIRED, LIVE, SDK),
                 note="compared and sent only with an admin user (without one there is no SSH to open)"),
    ClusterField("ssh_admin_username", "ssh_settings.admin_username", (_P + "userAccountCredentials.adminUserName",),
                 sdk="ssh_settings", normalise="text", render="if_set", explicit=(SDK,),
                 note="put_cluster builds AmlComputeSshSettings with the secrets"),
    ClusterField("ssh_credentials_hash", "ssh_settings", normalise="text", explicit=(DESIRED, LIVE, SDK),
                 note="a salted hash of admin_password/ssh_key_value (plan/kinds/cluster.py ssh_credentials_hash), kept in our "
                      "infra.secrets-hash tag since Azure never returns secrets; put_cluster sends the secrets"),
    ClusterField("subnet", "network_settings.subnet", (_P + "subnet",), read="subnet", sdk="network_settings",
                 normalise="arm_id", render="section", explicit=(DESIRED, SDK),
                 note="plan/kinds/cluster.py subnet_id makes the ARM id of vnet_name + subnet; put_cluster sends "
                      "NetworkSettings; Azure answers {id} or, in older api-versions, the id as a string "
                      "(compute_codec.subnet_id)"),
    ClusterField("identity_type", "identity.type", ("identity.type",), read="snake", sdk="identity",
                 normalise="identity_type", render="section", explicit=(SDK,),
                 note="put_cluster builds IdentityConfiguration with the user-assigned identities"),
    ClusterField("user_assigned_identities", "identity.user_assigned_identities",
                 ("identity.userAssignedIdentities",), read="keys", sdk="identity", normalise="arm_ids",
                 render="section", explicit=(DESIRED, SDK),
                 note="the stack lists {resource_id}; put_cluster builds ManagedIdentityConfiguration"),
    ClusterField("location", "location", ("properties.computeLocation", "location"), sdk="location",
                 normalise="location", render="if_set", explicit=(DESIRED,),
                 note="desired defaults to the workspace's location"),
    ClusterField("tags", "tags", ("tags",), read="dict", sdk="tags", normalise="as_is", render="if_set",
                 explicit=(DESIRED, LIVE, SDK),
                 note="the user's tags only: live tags are split from ours and Azure's (normalise.split_tags); "
                      "put_cluster writes ours beside them"),
    ClusterField("description", "description", ("properties.description",), sdk="description", normalise="text",
                 render="if_set"),
    ClusterField("prevent_destroy", "lifecycle.prevent_destroy", normalise="flag", explicit=(LIVE,),
                 note="infra's own: written as our infra.prevent-destroy tag (desired_resources), read back from it"),
    ClusterField("provisioning_state", None, ("properties.provisioningState",), compared=False, explicit=(LIVE,),
                 note="normalise._provisioning: kept only when not Succeeded"),
    ClusterField("provisioning_error", None, ("properties.provisioningErrors",), read="as_is",
                 value="provisioning_errors", compared=False, explicit=(REST, LIVE), note="the first error's code, as azure-ai-ml keeps it"),
    ClusterField("provisioning_since", None, ("properties.createdOn",), value="created_on", compared=False,
                 explicit=(LIVE,), note="kept while Creating or Updating (a stuck create is replaced)"),
)
FIELDS = {f.attribute: f for f in CLUSTER_FIELDS}
# live state, not fields: judged by update_semantics.yaml's cluster_provisioning
PROVISIONING_KEYS = tuple(f.attribute for f in CLUSTER_FIELDS if not f.compared)
# compared, but carried by our tags rather than by an Azure property (left out of the drift hash)
TAG_CARRIED = tuple(f.attribute for f in CLUSTER_FIELDS if f.compared and not f.rest)


def rows(stage: str) -> tuple[ClusterField, ...]:
    """The rows read through the table at `stage`."""
    return tuple(f for f in CLUSTER_FIELDS if f.plain(stage))


def path_value(obj: Any, path: str) -> Any:
    """`a.b.c` of nested mappings or objects; None where a step is missing."""
    for step in path.split("."):
        if obj is None:
            return None
        obj = obj.get(step) if isinstance(obj, dict) else getattr(obj, step, None)
    return obj


# ---- normalisers: a stack or a live value -> the compared form --------------------------------------------

def canonical_size(size: str) -> str:
    """The catalog's spelling of a size, else the size in Azure's naming convention's case: Azure answers a size
    in the case it was created with (`STANDARD_NC6`), and case alone must never read as a different size."""
    sku = load_catalog().get(size)
    return sku.name if sku else conventional_case(size)


def conventional_case(size: str) -> str:
    """`STANDARD_FX48MDS` -> `Standard_FX48mds` (https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions):
    only letters' case changes; a name that does not follow the convention comes back as written."""
    parts = parse_size_name(size)
    if parts is None:
        return size
    spelled = (f"Standard_{parts.family}{parts.vcpus}" + (f"-{parts.active_vcpus}" if parts.active_vcpus else "")
               + parts.features + (f"_{parts.accelerator}" if parts.accelerator else ""))
    for suffix in (f"_v{parts.version}" if parts.version > 1 else "", f"_v{parts.version}"):
        candidate = spelled + suffix + ("_Promo" if parts.promo else "")
        if candidate.lower() == size.strip().lower():
            return candidate
    return size


def normalise_location(location: str | None) -> str | None:
    return location.replace(" ", "").lower() if location else None


def seconds(value: Any) -> int | None:
    """120, "120", "PT2M", "PT120S", "PT1H" -> seconds."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip().upper()
    if text.isdigit():
        return int(text)
    m = re.fullmatch(r"P(?:(\d+)D)?T?(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?", text)
    if not m:
        return None
    d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return int(d * 86400 + h * 3600 + mi * 60 + s)


_TIER = {"dedicated": "dedicated", "lowpriority": "low_priority", "low_priority": "low_priority"}

NORMALISERS: dict[str, Callable[[Any], Any]] = {
    "as_is": lambda v: v,
    "size": lambda v: canonical_size(v or ""),
    # Azure's LowPriority, azure-ai-ml's low_priority, none at all (Azure's default: dedicated)
    "tier": lambda v: _TIER.get(str(v or "dedicated").replace("-", "").lower(), v),
    "count": lambda v: int(v or 0),
    "seconds": seconds,
    "flag": bool,
    "flag_default_true": lambda v: True if v is None else bool(v),  # Azure leaves enableNodePublicIp out: true
    "text": lambda v: v or None,
    "arm_id": lambda v: str(v).lower() if v else None,  # ARM ids compare case-insensitively
    "arm_ids": lambda v: sorted(str(i).lower() for i in v or []),
    "identity_type": lambda v: None if v in (None, "none", "None") else str(v).lower(),
    "location": normalise_location,
}


def normalised(field: ClusterField, value: Any) -> Any:
    return NORMALISERS[field.normalise](value)

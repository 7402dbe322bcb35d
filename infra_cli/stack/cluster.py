"""A cluster of the stack (`clusters:`): Azure ML's amlCompute, its field names those of the CLI v2 YAML, so an
`az ml compute` file pastes in unchanged. stack/cluster_fields.py says where each field goes in Azure."""

from __future__ import annotations

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import says
from infra_cli.stack.common_kinds import INT32_MAX, Count, Secretive, SecretiveText, Text, filled
from infra_cli.stack.fields import Field, Model
from infra_cli.stack.value_kinds import SECRET, Bool, DictOf, ListOf, OneOf, Str

# Azure ML's default VM size for an AmlCompute cluster whose YAML omits `size`
# (https://learn.microsoft.com/azure/machine-learning/reference-yaml-compute-aml).
AML_DEFAULT_SIZE = "Standard_DS3_v2"
AML_COMPUTE_SCHEMA = "https://azuremlschemas.azureedge.net/latest/amlCompute.schema.json"


class SshSettings(Model):
    """SSH access to the nodes (amlCompute ssh_settings). Pass secrets as ${VAR}: they are never written out."""

    admin_username = Field(Text | None, None, description="administrator user on each node")
    admin_password = Field(SECRET | None, None, description="secret: write ${var.NAME} of a variable declared sensitive, never the password itself")
    ssh_key_value = Field(SECRET | None, None, description="SSH public key; write it or ${var.NAME} (e.g. ${var.ssh_public_key})")


class NetworkSettings(Model):
    """Virtual network placement (amlCompute network_settings); changing it replaces the cluster."""

    vnet_name = Field(Text | None, None, description="virtual network name (with subnet as a name)")
    subnet = Field(Text | None, None, description="subnet name (with vnet_name) or full ARM id")


class UserAssignedIdentity(Model):
    """One user-assigned managed identity."""

    resource_id = Field(Text, description="ARM id of a user-assigned managed identity")


class Identity(Model):
    """Managed identity of the cluster (amlCompute identity)."""

    type = Field(OneOf("system_assigned", "user_assigned", "system_assigned,user_assigned", "none",
                       aliases={"SystemAssigned": "system_assigned", "UserAssigned": "user_assigned",
                                "SystemAssigned,UserAssigned": "system_assigned,user_assigned"}),
                 description="which managed identities the nodes get (any case)")
    user_assigned_identities = Field(ListOf(UserAssignedIdentity) | None, None,
                                     description="with type user_assigned: the identities, each {resource_id: ...}")


class Lifecycle(Model):
    """What plans may do to the resource."""

    prevent_destroy = Field(Bool(), False, description="refuse plans that delete or replace this cluster")


class Cluster(Model):
    """An Azure ML compute cluster; field names are amlCompute's in Azure ML CLI v2 YAML, so an `az ml compute`
    YAML file pastes in unchanged (its `$schema`, `name` and `type` included)."""

    schema_url = Field(Str() | None, None, alias="$schema", description="the amlCompute YAML schema; ignored "
                       f"(pasted from an `az ml compute` file, e.g. {AML_COMPUTE_SCHEMA})")
    name = Field(Text | None, None, description="the Azure ML compute name; when given (a pasted compute YAML) it "
                 "must equal this cluster's key, which is always the name infra creates in Azure")
    type = Field(OneOf("amlcompute"), "amlcompute",
                 description="only amlcompute clusters are managed (any case: AmlCompute)")
    # checked against the catalog by validate (cluster.size-unknown), control characters included
    size = Field(Str(after=filled, grammar_checked=True), AML_DEFAULT_SIZE,
                 description=says("VM size, e.g. Standard_ND96asr_v4 (see ", NextStep(("infra", "skus"), ("--infiniband",)),
                                  f"); default {AML_DEFAULT_SIZE}, Azure ML's default for a compute YAML without size"))
    tier = Field(OneOf("dedicated", "low_priority", aliases={"lowpriority": "low_priority"}), "dedicated",
                 description="VM priority, any case (Dedicated, low_priority, LowPriority); changing it "
                 "replaces the cluster")
    min_instances = Field(Count, 0, ge=0, le=INT32_MAX, description="nodes kept running when idle (changes in place)")
    max_instances = Field(Count, 1, ge=1, le=INT32_MAX, description="most nodes the cluster scales to (changes in place)")
    idle_time_before_scale_down = Field(Count, 120, ge=0, le=INT32_MAX,
                                        description="seconds a node idles before it is released")
    enable_node_public_ip = Field(Bool(), True,
                                  description="give nodes public IPs; false needs a subnet with outbound access")
    ssh_public_access_enabled = Field(Bool() | None, None, description="open the SSH port of the nodes")
    ssh_settings = Field(SshSettings | None, None)
    network_settings = Field(NetworkSettings | None, None)
    identity = Field(Identity | None, None)
    location = Field(Text | None, None, description="region of the cluster; defaults to the workspace's")
    tags = Field(DictOf(Secretive), factory=dict, description="Azure tags (text values)")
    description = Field(SecretiveText | None, None, description="free text shown in Azure ML studio")
    infiniband = Field(OneOf("required", "optional") | None, None,
                       description="required: the size must give InfiniBand to NCCL/MPI (an error otherwise); "
                       "optional (as unset): TCP sockets allowed, a warning for GPU jobs across nodes")
    lifecycle = Field(Lifecycle, factory=Lifecycle)

    def _check(self) -> None:
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances ({self.min_instances}) exceeds max_instances ({self.max_instances})")

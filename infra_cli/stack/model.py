"""The stack model. Field names are Azure ML CLI v2 YAML's (amlCompute, environment, command job), so a
user's compute.yml pastes into a stack; our additions are `infiniband`, `lifecycle`, `requires`, `smoke`.
Enumerated values are read in any case (`tier: Dedicated`, `type: PyTorch`), as Azure ML reads them.

The model checks shapes and types only; knowledge-based rules (InfiniBand, GPUs, MPI) live in validate/.
This module holds the stack itself (`Stack`: workspace, variables, outputs, imports); each section's model is a
module of its own: stack/cluster.py, stack/environment.py, stack/distribution.py, written in stack/fields.py's
engine with stack/common_kinds.py's shared kinds.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import says
from infra_cli.stack.addresses import AddressError, parse_address
from infra_cli.stack.cluster import Cluster
from infra_cli.stack.common_kinds import Text
from infra_cli.stack.distribution import Distribution
from infra_cli.stack.environment import Environment
from infra_cli.stack.fields import Field, Model
from infra_cli.stack.rule_switch import RuleSwitch
from infra_cli.stack.value_kinds import ANY, Bool, DictOf, ListOf, OneOf, Str

_AZURE_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def _guid(v: str) -> str:
    if not _AZURE_GUID.match(v):
        raise ValueError("must be a GUID like 00000000-0000-0000-0000-000000000000")
    return v.lower()


# Azure's clouds by the names azure-ai-ml and the Azure CLI give them (`az cloud list`); their endpoints are
# validators/clouds.yaml (knowledge/clouds.py), held equal to the SDKs' own cloud metadata by a test.
CLOUDS = ("AzureCloud", "AzureUSGovernment", "AzureChinaCloud")


def _cloud_name(v: Any) -> Any:
    """A cloud's name in any case; anything else is refused naming the closest one."""
    if not isinstance(v, str) or v.lower() in (c.lower() for c in CLOUDS):
        return v
    by_lower = {c.lower(): c for c in CLOUDS}
    close = difflib.get_close_matches(v.lower(), list(by_lower), n=1, cutoff=0.5)
    mean = f"did you mean {by_lower[close[0]]!r}? " if close else ""
    raise ValueError(f"{v!r} is not an Azure cloud: {mean}use one of {', '.join(CLOUDS)}")


class Workspace(Model):
    """The Azure ML workspace every resource of the stack lives in."""

    subscription_id = Field(Str(), description="Azure subscription id (a GUID)", after=_guid)
    resource_group = Field(Text, description="resource group of the workspace")
    name = Field(Text, description="workspace name")
    location = Field(Text, description="Azure region of the workspace, e.g. eastus",
                     after=lambda v: v.replace(" ", "").lower())
    cloud = Field(OneOf(*CLOUDS, aliases={c.lower(): c for c in CLOUDS}), "AzureCloud", before=_cloud_name,
                  description="the Azure cloud of the workspace (any case): AzureCloud (public), AzureUSGovernment "
                              "or AzureChinaCloud; ARM endpoint, sign-in authority and registry discovery follow it")


def _empty_section(v: Any) -> Any:
    return {} if v is None else v  # `clusters:` with nothing under it means none


class Variable(Model):
    """An input variable (Terraform's `variable`): `${var.NAME}` anywhere in the stack; its value from `default`,
    INFRA_VAR_NAME, `--var-file FILE` or `--var NAME=VALUE` (later wins, in that order)."""

    type = Field(OneOf("string", "number", "bool", "list", "map") | None, None,
                 description="string, number, bool, list or map; a value that is exactly ${var.NAME} keeps it")
    default = Field(ANY, None, description="the value when none is given")
    allowed = Field(ListOf(ANY) | None, None, description="the only values accepted")
    description = Field(Str() | None, None, description="what the variable is for")
    sensitive = Field(Bool(), False, description="never shown in output, plan files or logs")


class Output(Model):
    """An output value (Terraform's `output`), read live by `infra output STACK [NAME]`."""

    value = Field(ANY, description="an attribute of a resource: ${cluster.NAME.id}, ${environment.NAME.asset_id}, "
                                   "${smoke.NAME.verdict}, or text around such references")
    description = Field(Str() | None, None, description="what the value is for")
    sensitive = Field(Bool(), False, description="shown as (sensitive value) unless asked for by name")



def _import_address(v: str) -> str:
    try:
        return str(parse_address(v))   # the one address grammar (stack/addresses.py)
    except AddressError as exc:
        raise ValueError("must be cluster.NAME or environment.NAME (only clusters and environments are imported)"
                         + (f": {exc.detail}" if exc.detail else "") + f"; {exc.hint}") from None


class Import(Model):
    """An import block (Terraform's `import`): adopt a cluster or environment that exists in Azure but was not made
    by this stack. Plan says it will be imported, apply writes this stack's ownership tags on it and then converges
    it; once adopted the block changes nothing."""

    to = Field(Text, description="the address it becomes: cluster.NAME or environment.NAME", after=_import_address)
    # held to the address grammar's rule for NAME by validate's import_blocks (it depends on `to`'s kind), which
    # says what a name is where an empty one is refused too
    id = Field(Str(), description="its name in the Azure ML workspace (Azure ML cannot rename: the same as NAME)")


def _empty_list(v: Any) -> Any:
    return [] if v is None else v  # `import:` with nothing under it means none


class Stack(Model):
    """An infra stack file: Azure ML clusters, environments and distributions, planned and applied together."""

    stack = Field(Str(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$"),
                  description="the stack's name; written as a tag on everything it creates")
    workspace = Field(Workspace)
    clusters = Field(DictOf(Cluster), factory=dict, before=_empty_section, description="compute clusters by name")
    environments = Field(DictOf(Environment), factory=dict, before=_empty_section, description="environments by name")
    distributions = Field(DictOf(Distribution), factory=dict, before=_empty_section,
                          description="distributed jobs (each gets a smoke test) by name")
    variables = Field(DictOf(Variable), factory=dict, before=_empty_section,
                      description="input variables by name, used as ${var.NAME}")
    outputs = Field(DictOf(Output), factory=dict, before=_empty_section,
                    description=says("output values by name (", NextStep(("infra", "output"), ("STACK",)), ")"))
    imports = Field(ListOf(Import), factory=list, before=_empty_list, alias="import",
                    description="existing clusters and environments to adopt: [{to: cluster.NAME, id: NAME}]")
    rules = Field(DictOf(RuleSwitch), factory=dict, before=_empty_section,
                  description=says("rules of ", NextStep(("infra", "rules")), " switched for this stack: {ID: {enabled: "
                                   "false, reason: WHY}}; a rule's warnings are switched off, never its errors"))

    def size_of(self, dist: Distribution) -> str | None:
        """The size the distribution runs on, the one place validate, render and plan read it from: its cluster's
        size, a serverless job's resources.instance_type; None where offline cannot know it (a compute infra does
        not manage, whose size plan reads live; a serverless job without instance_type: Azure ML picks one)."""
        if dist.cluster is not None:
            cluster = self.clusters.get(dist.cluster)
            return cluster.size if cluster is not None else None
        return dist.instance_type if dist.runs_on == "serverless" else None

    def compute_of(self, dist: Distribution) -> str | None:
        """The job's `compute:` (azureml:NAME), None for serverless compute (the job names none)."""
        if dist.runs_on == "compute" and "/" in dist.compute:
            return dist.compute   # an ARM id, as written (azure-ai-ml reads it with or without azureml:)
        name = dist.cluster if dist.cluster is not None else dist.compute_name
        return f"azureml:{name}" if name is not None else None

"""An environment of the stack (`environments:`): a curated one, an image, or one Azure ML builds, as Azure ML's
environment YAML writes it (its `$schema` and `name` included, so an `az ml environment` file pastes in)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from infra_cli.stack.common_kinds import Count, PathText, Secretive, SecretiveText, Text, filled, path_text
from infra_cli.stack.fields import Field, Model
from infra_cli.stack.secret import revealed
from infra_cli.stack.value_kinds import ANY, GRAMMAR_CHECKED, DictOf, ListOf, OneOf, Str

# Curated references Azure ML resolves: azureml:NAME@latest, azureml:NAME:VERSION, or a registry URI.
_CURATED_REFERENCE = re.compile(
    r"^azureml:[A-Za-z0-9][A-Za-z0-9_.-]*(?:@latest|:[A-Za-z0-9][A-Za-z0-9_.-]*)$"
    r"|^azureml://registries/[A-Za-z0-9_-]+/environments/[A-Za-z0-9][A-Za-z0-9_.-]*/(?:versions|labels)/[A-Za-z0-9_.-]+$"
    # a curated name without `azureml:`, as azure-ai-ml takes it (its CURATED_ENV_PREFIX) and the guides write it
    r"|^AzureML-[A-Za-z0-9_.-]*(?:@latest|:[A-Za-z0-9][A-Za-z0-9_.-]*)$")


class Build(Model):
    """An image Azure ML builds: from one of our Dockerfile templates, or from your own build context."""

    template = Field(Text | None, None, description="a Dockerfile template from templates/docker/, e.g. openmpi-rdma")
    parameters = Field(DictOf(GRAMMAR_CHECKED), factory=dict, description="the template's parameters")
    path = Field(PathText | None, None, description="a build context directory, relative to the stack file, or a "
                 "remote one Azure ML fetches itself (https://... or azureml://...), never read here")
    dockerfile_path = Field(PathText, "Dockerfile", description="the Dockerfile inside the build context")

    def _check(self) -> None:
        if (self.template is None) == (self.path is None):
            raise ValueError("build needs exactly one of `template` or `path`")
        if self.remote and _CREDENTIAL_IN_URL.search(revealed(self.path)):
            # a plan, a plan file and a rendered environment show the URI: a credential in it would be shown too
            raise ValueError("a remote build context's URL holds a credential (a SAS signature or a user:password@): "
                             "plans and rendered files show this URL; use an azureml://datastores/... URI, or a URL "
                             "the workspace's identity can read without one")

    @property
    def remote(self) -> bool:
        """A build context Azure ML fetches from a URL (azure-ai-ml uploads nothing for one: its
        `is_url`/`is_registry_id_for_resource`): identified by its URI, never looked up on this machine."""
        return self.path is not None and is_remote_context(self.path)

    @property
    def local_path(self) -> str | None:
        """`path` when it names a directory of the stack's project (relative to the stack file), else None."""
        return None if self.path is None or self.remote else self.path


# The paths azure-ai-ml takes as a build context without a local lookup: its `is_url` (urlparse finds a scheme
# and a location: https://..., an azureml://datastores/... or azureml://registries/... URI).
_REMOTE_CONTEXT = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]+")
# A credential written into a URL: a SAS signature (sig=) or user information before the host.
_CREDENTIAL_IN_URL = re.compile(r"[?&](?:sig|signature|token|access_token|code)=|^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@]*@",
                                re.IGNORECASE)


def is_remote_context(path: str) -> bool:
    return bool(_REMOTE_CONTEXT.match(path))


class Route(Model):
    """One route of an inference server (azure-ai-ml RouteSchema)."""

    port = Field(Count, ge=1, le=65535, description="the port the server listens on")
    path = Field(Text, description="the route's path, e.g. /score")


class InferenceConfig(Model):
    """An environment's inference_config (azure-ai-ml InferenceConfigSchema): all three routes are required."""

    liveness_route = Field(Route, description="{port, path} Azure ML probes for liveness")
    readiness_route = Field(Route, description="{port, path} Azure ML probes for readiness")
    scoring_route = Field(Route, description="{port, path} requests are scored on")


def _version_text(v: Any) -> Any:
    if isinstance(v, float):  # YAML reads 1.10 as 1.1: the text the user meant is already lost
        raise ValueError(f"write the version in quotes (version: \"{v}\"); YAML reads it as a number")
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _curated_reference(v: str | None) -> str | None:
    if v is not None and not _CURATED_REFERENCE.match(v.strip()):
        raise ValueError(f"{v!r} is not a curated environment reference: write azureml:NAME@latest, "
                         "azureml:NAME:VERSION, AzureML-NAME@latest or "
                         "azureml://registries/REGISTRY/environments/NAME/versions/VERSION")
    return v


def _conda_file(v: Any) -> Any:
    """A path to a conda YAML file, or the conda YAML inline (a mapping), as azure-ai-ml's Environment and the
    environment YAML reference take `conda_file`."""
    if isinstance(v, dict):
        try:
            yaml.safe_dump(v)
        except (yaml.YAMLError, RecursionError):
            raise ValueError("the inline conda YAML holds a value that is not plain YAML (text, number, list, "
                             "mapping)") from None
        return v
    if v is None or isinstance(v, str):
        controls = sorted({c for c in v or "" if ord(c) < 32 or ord(c) == 127})   # ANY lets a line break through
        if controls:
            raise ValueError(f"Text should hold no control characters, found {', '.join(map(repr, controls))} "
                             "(a path holds none)")
        return v if v is None else path_text(v)
    raise ValueError("expected the path of a conda YAML file (conda_file: conda.yml) or the conda YAML inline "
                     "(conda_file: {dependencies: [python=3.10, {pip: [torch]}]})")


AML_ENVIRONMENT_SCHEMA = "https://azuremlschemas.azureedge.net/latest/environment.schema.json"


class Environment(Model):
    """A training environment: exactly one of `curated`, `image` or `build`. An `az ml environment` YAML file
    pastes in unchanged (its `$schema` and `name` included)."""

    schema_url = Field(Str() | None, None, alias="$schema", description="the environment YAML schema; ignored "
                       f"(pasted from an `az ml environment` file, e.g. {AML_ENVIRONMENT_SCHEMA})")
    name = Field(Text | None, None, description="the Azure ML environment name; when given (a pasted environment "
                 "YAML) it must equal this environment's key, which is always the name infra registers")

    curated = Field(Text | None, None, after=_curated_reference,
                    description="azureml:NAME@latest, azureml:NAME:VERSION or azureml://registries/...")
    # held to the OCI reference grammar by validate (environment.image-reference), control characters included
    image = Field(Str(after=filled, grammar_checked=True) | None, None,
                  description="a container image reference, e.g. myacr.azurecr.io/train:1.0")
    conda_file = Field(ANY | None, None, after=_conda_file,
                       description="with image: a conda YAML file, relative to the stack file, or its YAML inline "
                                   "(a mapping, as in Azure ML's environment YAML)")
    build = Field(Build | None, None)
    requires = Field(ListOf(Str()), factory=list, description="image requirement specs, e.g. openmpi>=4.1")
    version = Field(Text | None, None, before=_version_text,
                    description="environment version; default: derived from the content")
    tags = Field(DictOf(Secretive), factory=dict, description="Azure tags (text values)")
    description = Field(SecretiveText | None, None, description="free text")
    os_type = Field(OneOf("linux"), "linux", description="only Linux images run distributed GPU training (any case: Linux)")
    inference_config = Field(InferenceConfig | None, None, description="the routes of an inference server in the "
                             "image, as Azure ML's environment YAML writes them; passed through as written")

    def _check(self) -> None:
        given = [k for k in ("curated", "image", "build") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("an environment needs exactly one of `curated`, `image` or `build`"
                             + (f" (got {', '.join(given)})" if given else ""))
        if self.conda_file is not None and self.image is None:
            raise ValueError("`conda_file` goes with `image` only")
        if self.curated is not None and self.version is not None:
            raise ValueError("a curated environment is referenced, not versioned: put the version in the reference")

    @property
    def kind(self) -> str:
        return "curated" if self.curated else "image" if self.image else "build"

    @property
    def conda_path(self) -> str | None:
        """conda_file when it names a file (relative to the stack file), else None."""
        return self.conda_file if isinstance(self.conda_file, str) else None

    @property
    def inline_conda(self) -> str | None:
        """conda_file written inline, as the YAML text infra renders to a file, hashes and registers; else None."""
        if not isinstance(self.conda_file, dict):
            return None
        return inline_conda_text(self.conda_file)



def inline_conda_text(conda: dict) -> str:
    """A conda file written inline, as the YAML text infra renders to a file, hashes and registers."""
    # sent to Azure as the environment's conda file (a secret in it, e.g. a package index token, in clear)
    return yaml.safe_dump(revealed(conda), sort_keys=False, default_flow_style=False, allow_unicode=True)

"""desired: a validated stack -> the resources it asks for, normalised and secret-free.

The attributes here are exactly what the diff compares with live state (normalise.py brings live state to the
same shape). Secrets never enter them: SSH credentials are represented by a salted hash, which is also written
as a tag so a later plan can tell whether they changed (Azure never returns them).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from infra_cli.conventions import TAG_ADDRESS, TAG_HASH, TAG_PREVENT_DESTROY, TAG_SECRETS, TAG_STACK
from infra_cli.knowledge.docker_templates import template_dir
from infra_cli.knowledge.update_semantics import environment_content_fields
from infra_cli.paths import context_files
from infra_cli.plan.model import Resource, content_hash
from infra_cli.stack.cluster_fields import (CLUSTER_FIELDS, DESIRED, TAG_CARRIED, normalise_location, normalised,
                                           path_value)
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.secret import Secret, contains_secret
from infra_cli.stack.model import Cluster, Environment, Stack, Workspace


@dataclass(frozen=True)
class ClusterSecrets:
    """What a create needs but a plan must never carry."""

    admin_username: str | None = None
    admin_password: str | None = None
    ssh_key_value: str | None = None


def subnet_id(workspace: Workspace, vnet_name: str | None, subnet: str | None) -> str | None:
    """Short subnet names become the full ARM id Azure reports back; compared lower-case, as ARM ids are."""
    if not subnet:
        return None
    if subnet.startswith("/"):
        return subnet.lower()
    if not vnet_name:
        return subnet.lower()
    return (f"/subscriptions/{workspace.subscription_id}/resourcegroups/{workspace.resource_group}"
            f"/providers/microsoft.network/virtualnetworks/{vnet_name}/subnets/{subnet}").lower()


def ssh_credentials_hash(stack_name: str, cluster_name: str, secrets: ClusterSecrets) -> str | None:
    """What tells a changed SSH secret from an unchanged one, since Azure never returns the secret. It lives in a
    tag and plan files, so it is scrypt (memory-hard, ~30 ms a guess) rather than a fast hash a weak password
    could be guessed from offline; the salt makes it differ per stack and cluster."""
    if not (secrets.ssh_key_value or secrets.admin_password):
        return None
    return secret_digest(f"infra-ssh/{stack_name}/{cluster_name}",
                         [secrets.ssh_key_value or "", secrets.admin_password or ""])


def secret_digest(salt: str, secrets: list[str]) -> str:
    """A digest of secret values that may be stored (a tag, a plan file) yet tells a change: scrypt
    (memory-hard, ~30 ms a guess) rather than a fast hash a weak secret could be guessed from offline."""
    secret = b"\0".join(value.encode() for value in secrets)
    return hashlib.scrypt(secret, salt=salt.encode(), n=2**14, r=8, p=1, maxmem=64 * 1024 * 1024, dklen=16).hex()


def cluster_secrets(cluster: Cluster) -> ClusterSecrets:
    ssh = cluster.ssh_settings
    if ssh is None:
        return ClusterSecrets()
    return ClusterSecrets(
        ssh.admin_username,
        ssh.admin_password.get_secret_value() if ssh.admin_password else None,
        ssh.ssh_key_value.get_secret_value() if ssh.ssh_key_value else None,
    )


def cluster_attributes(stack: Stack, name: str, cluster: Cluster) -> dict:
    """The stack's cluster as the plan compares it: plain fields through stack/cluster_fields.py, the composite
    ones (SSH, subnet, identities, location's default, tags) here, all in the table's order."""
    secrets = cluster_secrets(cluster)
    net = cluster.network_settings
    identity = cluster.identity
    explicit = {
        "ssh_public_access_enabled": bool(cluster.ssh_public_access_enabled) if secrets.admin_username else None,
        "ssh_credentials_hash": ssh_credentials_hash(stack.stack, name, secrets),
        "subnet": subnet_id(stack.workspace, net.vnet_name if net else None, net.subnet if net else None),
        "user_assigned_identities": sorted(i.resource_id.lower() for i in (identity.user_assigned_identities or []))
        if identity else [],
        "location": normalise_location(cluster.location) or stack.workspace.location,
        "tags": dict(sorted(cluster.tags.items())),
    }
    return {f.attribute: normalised(f, path_value(cluster, f.stack)) if f.plain(DESIRED) else explicit[f.attribute]
            for f in CLUSTER_FIELDS if f.stack is not None}


def live_comparable(attributes: dict) -> dict:
    """The attributes Azure can report back (used for the drift hash): everything but tag-carried ones."""
    return {k: v for k, v in attributes.items() if k not in TAG_CARRIED}


_CHUNK = 1 << 20   # files are hashed in chunks of this many bytes: memory stays flat for a file of any size


def _hash_file(h, path: Path) -> None:
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    _hash_file(h, path)
    return h.hexdigest()


def _tree_sha256(root: Path) -> str:
    """A build context's content as it is uploaded (paths.context_files: the ignore file honoured, no link
    followed out of it): relative paths and bytes of every file, in a stable order."""
    h = hashlib.sha256()
    for f in sorted(context_files(root).files, key=lambda f: Path(f.relative)):  # the order hashes always had
        h.update(f.relative.encode() + b"\0")
        _hash_file(h, f.source)
    return h.hexdigest()


def environment_attributes(loaded: LoadedStack, env: Environment) -> dict:
    base = loaded.base_dir
    build = None
    if env.build is not None:
        if env.build.template:
            build = {"template": env.build.template, "parameters": env.build.parameters,
                     "template_sha256": _tree_sha256(template_dir(env.build.template))}
        else:   # a remote context (https://, azureml://) is never read here: its URI is its identity
            build = {"path": env.build.path, "dockerfile_path": env.build.dockerfile_path,
                     "context_sha256": hashlib.sha256(env.build.path.encode()).hexdigest() if env.build.remote
                     else _tree_sha256(base / env.build.path)}
    attributes = {
        "kind": env.kind,
        "curated": env.curated,
        "image": env.image,
        "conda_sha256": _file_sha256(base / env.conda_path) if env.conda_path else
        hashlib.sha256(env.inline_conda.encode()).hexdigest() if env.inline_conda else None,
        "build": build,
        "version": env.version,
        "requires": list(env.requires),
        "description": env.description,
        "tags": dict(sorted(env.tags.items())),
    }
    if env.inference_config is not None:   # only where given: every other environment keeps its attributes and hash
        attributes["inference_config"] = env.inference_config.model_dump()
    attributes["content_hash"] = environment_content_hash(attributes)
    if contains_secret(env.model_dump()):   # a hash of a secret's text (an image, a conda file from ${ENV}) is one
        for key in ("conda_sha256", "content_hash"):
            attributes[key] = Secret(attributes[key]) if attributes[key] is not None else None
    return attributes


# Content compared only where an environment has it, so an environment without it keeps the hash it always had.
_CONTENT_WHERE_GIVEN = ("inference_config",)


def environment_content_hash(attributes: dict) -> str:
    return content_hash({**{k: attributes.get(k) for k in environment_content_fields()},
                         **{k: attributes[k] for k in _CONTENT_WHERE_GIVEN if attributes.get(k) is not None}})


def desired_resources(loaded: LoadedStack) -> list[Resource]:
    stack = loaded.stack
    out: list[Resource] = []
    for name, cluster in stack.clusters.items():
        attrs = cluster_attributes(stack, name, cluster)
        address = f"cluster.{name}"
        digest = content_hash(live_comparable(attrs))   # of a secret's clear text: a secret itself (a fast hash)
        tags = {TAG_STACK: stack.stack, TAG_ADDRESS: address,
                TAG_HASH: Secret(digest) if contains_secret(attrs) else digest}
        if attrs["ssh_credentials_hash"]:
            tags[TAG_SECRETS] = attrs["ssh_credentials_hash"]
        if attrs["prevent_destroy"]:
            tags[TAG_PREVENT_DESTROY] = "true"
        out.append(Resource(address, "cluster", name, attrs, tags))
    for name, env in stack.environments.items():
        attrs = environment_attributes(loaded, env)
        address = f"environment.{name}"
        tags = {TAG_STACK: stack.stack, TAG_ADDRESS: address, TAG_HASH: attrs["content_hash"]}
        out.append(Resource(address, "environment", name, attrs, tags))
    return out


def distribution_dependencies(stack: Stack) -> dict[str, tuple[str, ...]]:
    """smoke.DIST -> the addresses it runs on."""
    return {f"smoke.{name}": ((f"cluster.{d.cluster}",) if d.cluster is not None else ())   # serverless, or a
            + (f"environment.{d.environment}",) for name, d in stack.distributions.items()}   # compute read live

"""Registry credentials: Docker/containers config files, the bearer-token challenge, and ACR's AAD exchange.

Secrets stay in memory: nothing here logs or returns a token in a message.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from infra_cli.knowledge.clouds import clouds, registry_cloud

ACR_SUFFIXES = (".azurecr.io", ".azurecr.cn", ".azurecr.us")
# Hosts besides the registry's own that may receive its login as its token service (comma-separated host names
# or host:port), e.g. auth.docker.io for a private Docker Hub image.
TOKEN_HOSTS_ENV = "INFRA_REGISTRY_TOKEN_HOSTS"
HELPER_TIMEOUT_S = 30     # a credential helper's answer; less when less of the check's --timeout is left


@dataclass(frozen=True)
class Credentials:
    username: str | None = None
    password: str | None = None
    identity_token: str | None = None   # an OAuth2 refresh token (e.g. from `az acr login`)

    def basic(self) -> str | None:
        if self.username is None or self.password is None:
            return None
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()


def config_files() -> list[Path]:
    """Where docker, podman and skopeo keep logins, in the order they are consulted."""
    out = []
    if os.environ.get("REGISTRY_AUTH_FILE"):
        out.append(Path(os.environ["REGISTRY_AUTH_FILE"]))
    if os.environ.get("XDG_RUNTIME_DIR"):
        out.append(Path(os.environ["XDG_RUNTIME_DIR"]) / "containers" / "auth.json")
    docker_dir = Path(os.environ["DOCKER_CONFIG"]) if os.environ.get("DOCKER_CONFIG") else Path.home() / ".docker"
    out.append(docker_dir / "config.json")
    return out


def _host_of(key: str) -> str:
    key = re.sub(r"^https?://", "", key)
    return key.split("/", 1)[0]


def _object(value: object) -> dict:
    """A JSON object, or {} for anything else: a malformed login is treated as none (the registry's 401 then
    says to log in), as docker's own unreadable config is."""
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _helper(name: object, host: str, timeout_s: float) -> Credentials | None:
    if not isinstance(name, str):
        return None
    try:
        proc = subprocess.run([f"docker-credential-{name}", "get"], input=host.encode(), capture_output=True,
                              timeout=timeout_s)
        if proc.returncode != 0:
            return None
        data = _object(json.loads(proc.stdout))
    except (OSError, ValueError, RecursionError, subprocess.TimeoutExpired):   # RecursionError: nested too deep
        return None
    if data.get("Username") == "<token>":
        return Credentials(identity_token=_text(data.get("Secret")))
    return Credentials(_text(data.get("Username")), _text(data.get("Secret")))


def _from_auths_entry(entry: dict) -> Credentials | None:
    if _text(entry.get("identitytoken")):
        return Credentials(identity_token=entry["identitytoken"])
    if _text(entry.get("auth")):
        try:
            user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
        except ValueError:     # binascii.Error and UnicodeDecodeError: not base64 of user:password
            return None
        return Credentials(user, password)
    if _text(entry.get("username")):
        return Credentials(entry["username"], _text(entry.get("password")))
    return None


def lookup_credentials(host: str, timeout_s: float = HELPER_TIMEOUT_S) -> Credentials | None:
    hub_keys = {"registry-1.docker.io", "index.docker.io", "docker.io"}
    for path in config_files():
        try:
            data = _object(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, RecursionError):   # RecursionError: nested too deep
            continue
        helper = _object(data.get("credHelpers")).get(host)
        if helper:
            return _helper(helper, host, timeout_s)
        for key, entry in _object(data.get("auths")).items():
            key_host = _host_of(key)
            if key_host != host and not (key_host in hub_keys and host in hub_keys):
                continue
            found = _from_auths_entry(_object(entry))
            if found:
                return found
        if data.get("credsStore"):
            found = _helper(data["credsStore"], host, timeout_s)
            if found:
                return found
    return None


def may_receive_login(realm_hostname: str, realm_netloc: str, registry_hostname: str) -> bool:
    """Whether a bearer realm's host may be sent the registry's login (a password, a refresh token, an Azure AD
    token): the registry's own host, or one the user lists in INFRA_REGISTRY_TOKEN_HOSTS. Any other host is
    asked for an anonymous token only (as for a public image on Docker Hub, whose realm is auth.docker.io)."""
    if realm_hostname.lower() == registry_hostname.lower():
        return True
    allowed = {h.strip().lower() for h in os.environ.get(TOKEN_HOSTS_ENV, "").split(",") if h.strip()}
    return realm_hostname.lower() in allowed or realm_netloc.lower() in allowed


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """'Bearer realm="https://x/token",service="x",scope="repository:a:pull"' -> ('bearer', {...})."""
    scheme, _, rest = header.strip().partition(" ")
    params = {k.lower(): v for k, v in re.findall(r'(\w+)="([^"]*)"', rest)}
    return scheme.lower(), params


def is_acr(hostname: str) -> bool:
    return hostname.endswith(ACR_SUFFIXES)


def aad_access_token(credential=None, registry_host: str = "") -> tuple[str, str | None]:
    """An Azure AD token for ACR's /oauth2/exchange, and its tenant if known, from the registry's cloud (its
    login-server suffix: .azurecr.us is US Government, .azurecr.cn China; validators/clouds.yaml): signed in at
    that cloud's authority, for its resource manager's scope. azure-identity is imported only here, only for ACR,
    so `infra image check` stays light everywhere else."""
    cloud = registry_cloud(registry_host) or clouds()["AzureCloud"]
    if credential is None:
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential(exclude_interactive_browser_credential=True,
                                            authority=cloud.authority_host)
    token = credential.get_token(cloud.arm_scope)
    return token.token, os.environ.get("AZURE_TENANT_ID")

"""Lean reads over Azure's REST API: azure-core's pipeline and nothing else (no azure.ai.ml, no azure-mgmt-*).

Plan and `--refresh-only` read a few REST resources; importing azure-ai-ml for that costs more than the reads.
The pipeline carries the same credential and retry policy as the SDK clients (clients.py), so throttling and
transient failures are handled alike. Each read sends the request (path, api-version, query) the SDK would
send, and an error is azure-core's HttpResponseError as the SDKs raise it, read by azure/errors.py.
List answers are paged with `nextLink` (https://learn.microsoft.com/rest/api/azure/#async-operations-throttling-and-paging).
"""

from __future__ import annotations

from typing import Any, Iterator
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from azure.core import PipelineClient
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.core.pipeline.policies import BearerTokenCredentialPolicy, HeadersPolicy, UserAgentPolicy
from azure.core.rest import HttpRequest

from infra_cli.knowledge.clouds import clouds

_MAX_PAGES = 1000  # a nextLink that never ends must not loop forever
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _transport(base_url: str, connection_verify: Any) -> Any:
    """The local emulator is read with the standard library's http.client (loopback.py: requests' import is most
    of a local plan's time); Azure itself with requests, as the SDKs reach it."""
    if urlsplit(base_url).hostname in _LOOPBACK:
        from infra_cli.azure.loopback import LoopbackTransport

        return LoopbackTransport(connection_verify=connection_verify, connection_timeout=30, read_timeout=120)
    from azure.core.pipeline.transport import RequestsTransport

    return RequestsTransport(connection_verify=connection_verify, connection_timeout=30, read_timeout=120)


class ArmReader:
    """GET and paged list over one base URL (ARM, or the local emulator), with the SDKs' credential and retries.
    `scope`: the token scope of the cloud's ARM (`https://management.usgovcloudapi.net/.default`, ...), also what
    Azure ML's registry discovery and registries take; default the public cloud's (validators/clouds.yaml)."""

    def __init__(self, base_url: str, credential: Any, retry_policy: Any, *,
                 scope: str | None = None, connection_verify: Any = True):
        if scope is None:
            scope = clouds()["AzureCloud"].arm_scope
        self.base_url = base_url.rstrip("/") + "/"
        self.scope = scope
        self._client = PipelineClient(self.base_url, transport=_transport(self.base_url, connection_verify), policies=[
            HeadersPolicy({"Accept": "application/json"}), UserAgentPolicy("infra-cli"), retry_policy,
            BearerTokenCredentialPolicy(credential, scope)])

    def url(self, path_or_url: str) -> str:
        return path_or_url if "://" in path_or_url else self.base_url + path_or_url.lstrip("/")

    def _send(self, url: str, params: dict[str, Any]) -> Any:
        response = self._client.send_request(HttpRequest("GET", url, params=params))
        if response.status_code == 404:
            raise ResourceNotFoundError(response=response)
        if response.status_code >= 400:
            raise HttpResponseError(response=response)
        return response.json() if response.content else {}

    def get(self, path: str, api_version: str, **query: Any) -> dict | None:
        """One resource; None when Azure answers 404."""
        try:
            return self._send(self.url(path), {"api-version": api_version, **query})
        except ResourceNotFoundError:
            return None

    def pages(self, path: str, api_version: str, **query: Any) -> Iterator[dict]:
        """Every item of a list, page after page. A nextLink keeps its own query ($skipToken) with our
        api-version, as the SDKs send it; a relative one is taken against the base URL."""
        url, params = self.url(path), {"api-version": api_version, **query}
        for _ in range(_MAX_PAGES):
            body = self._send(url, params)
            yield from (body.get("value") or [])
            next_link = body.get("nextLink")
            if not next_link:
                return
            parts = urlsplit(self.url(next_link))
            params = {**dict(parse_qsl(parts.query, keep_blank_values=True)), "api-version": api_version}
            url = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))

    def list(self, path: str, api_version: str, **query: Any) -> list[dict]:
        """A whole list (a 404 raises, as the SDKs' list calls do)."""
        return list(self.pages(path, api_version, **query))

    def first(self, path: str, api_version: str, **query: Any) -> dict | None:
        """The first item of a list (following nextLink past empty pages only), None when there is none."""
        try:
            return next(self.pages(path, api_version, **query), None)
        except ResourceNotFoundError:
            return None

    def close(self) -> None:
        self._client.close()

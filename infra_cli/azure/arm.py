"""Lean REST calls to Azure: azure-core's pipeline and nothing else (no azure.ai.ml, no azure-mgmt-*).

Plan reads a few REST resources, and apply, destroy, import and state rm write a few more; importing azure-ai-ml
for that costs more than the requests (1.5-2.5 CPU-s a command; docs/ARCHITECTURE.md). The pipeline carries the
same credential and retry policy as the SDK clients (clients.py), so throttling and transient failures are handled
alike. Each request is the one the SDK would send (method, path, api-version, query, body), and an error is
azure-core's exception as the SDKs raise it (404 ResourceNotFoundError, 409 ResourceExistsError, else
HttpResponseError), read by azure/errors.py. List answers are paged with `nextLink`; a long-running write is
followed through its `Azure-AsyncOperation` (else `Location`) header as ARM defines it
(https://learn.microsoft.com/azure/azure-resource-manager/management/async-operations).
"""

from __future__ import annotations

import time
from typing import Any, Iterator
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from azure.core import PipelineClient
from azure.core.exceptions import HttpResponseError, ResourceExistsError, ResourceNotFoundError
from azure.core.pipeline.policies import BearerTokenCredentialPolicy, HeadersPolicy, UserAgentPolicy
from azure.core.rest import HttpRequest, HttpResponse

from infra_cli.knowledge.clouds import clouds
from infra_cli.stack.secret import revealed

_MAX_PAGES = 1000  # a nextLink that never ends must not loop forever
_TERMINAL = ("succeeded", "failed", "canceled", "cancelled")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _transport(base_url: str, connection_verify: Any) -> Any:
    """The local emulator is read with the standard library's http.client (loopback.py: requests' import is most
    of a local plan's time); Azure itself with requests, as the SDKs reach it."""
    if urlsplit(base_url).hostname in _LOOPBACK:
        from infra_cli.azure.loopback import LoopbackTransport

        return LoopbackTransport(connection_verify=connection_verify, connection_timeout=30, read_timeout=120)
    from azure.core.pipeline.transport import RequestsTransport

    return RequestsTransport(connection_verify=connection_verify, connection_timeout=30, read_timeout=120)


class ArmClient:
    """GET, paged list, PUT and DELETE over one base URL (ARM, or the local emulator), with the SDKs' credential
    and retries. `scope`: the token scope of the cloud's ARM (`https://management.usgovcloudapi.net/.default`, ...),
    also what Azure ML's registry discovery and registries take; default the public cloud's (validators/clouds.yaml).
    `polling_s`: the wait between polls of a long-running operation when Azure sends no Retry-After; `lro_deadline_s`:
    how long one may run before it is reported as not finished."""

    def __init__(self, base_url: str, credential: Any, retry_policy: Any, *,
                 scope: str | None = None, connection_verify: Any = True, polling_s: float = 10.0,
                 lro_deadline_s: float = 3600.0):
        if scope is None:
            scope = clouds()["AzureCloud"].arm_scope
        self.base_url = base_url.rstrip("/") + "/"
        self.scope = scope
        self.polling_s, self.lro_deadline_s = polling_s, lro_deadline_s
        self._client: PipelineClient[HttpRequest, HttpResponse] = PipelineClient(
            self.base_url, transport=_transport(self.base_url, connection_verify), policies=[
                HeadersPolicy({"Accept": "application/json"}), UserAgentPolicy("infra-cli"), retry_policy,
                BearerTokenCredentialPolicy(credential, scope)])

    def url(self, path_or_url: str) -> str:
        return path_or_url if "://" in path_or_url else self.base_url + path_or_url.lstrip("/")

    def _request(self, method: str, url: str, params: dict[str, Any], body: Any = None) -> Any:
        """The answer to one request (retried by the pipeline); an error answer raised as the SDKs raise it. The
        body is where a secret (stack/secret.py) is sent in clear: here, and nowhere else infra writes."""
        response = self._client.send_request(HttpRequest(method, url, params=params, json=revealed(body)))
        if response.status_code == 404:
            raise ResourceNotFoundError(response=response)
        if response.status_code == 409:
            raise ResourceExistsError(response=response)
        if response.status_code >= 400:
            raise HttpResponseError(response=response)
        return response

    def _send(self, url: str, params: dict[str, Any]) -> Any:
        response = self._request("GET", url, params)
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

    def put(self, path: str, api_version: str, body: dict, **query: Any) -> dict:
        """Create or replace a resource; a long-running one is waited for, then read back as the SDKs do."""
        url = self.url(path)
        response = self._request("PUT", url, {"api-version": api_version, **query}, body)
        if self._wait(response):
            return self._send(url, {"api-version": api_version})
        return response.json() if response.content else {}

    def delete(self, path: str, api_version: str, **query: Any) -> None:
        """Delete a resource and wait for the operation to end; a resource already gone raises
        ResourceNotFoundError, as the SDKs' begin_delete does."""
        self._wait(self._request("DELETE", self.url(path), {"api-version": api_version, **query}))

    def _wait(self, response: Any) -> bool:
        """Follow a long-running operation to its end: True when there was one (and it succeeded). A failed or
        canceled one raises HttpResponseError carrying the operation's own error, as azure-core's ARM polling does."""
        operation = response.headers.get("Azure-AsyncOperation")
        location = None if operation else response.headers.get("Location")
        if not operation and not (location and response.status_code == 202):
            return False
        poll_url = operation or location
        assert poll_url is not None     # one of the two, as just checked
        deadline = time.monotonic() + self.lro_deadline_s
        while True:
            self._pause(response, deadline)
            response = self._request("GET", self.url(poll_url), {})
            if location:   # Location polling: 202 while it runs, anything else when done
                if response.status_code != 202:
                    return True
                continue
            status = str((response.json() if response.content else {}).get("status") or "").lower()
            if status == "succeeded":
                return True
            if status in _TERMINAL:
                raise HttpResponseError(response=response)

    def _pause(self, response: Any, deadline: float) -> None:
        retry_after = response.headers.get("Retry-After")
        wait = min(float(retry_after), 60.0) if retry_after and retry_after.strip().isdigit() else self.polling_s
        if time.monotonic() + wait > deadline:
            raise TimeoutError(f"Azure's operation did not finish within {self.lro_deadline_s:.0f} s")
        time.sleep(wait)

    def close(self) -> None:
        self._client.close()

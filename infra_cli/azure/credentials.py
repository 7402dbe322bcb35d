"""Credentials: Azure's DefaultAzureCredential, or the local emulator's token (DIR/token, see emulator/auth.py)."""

from __future__ import annotations

import logging
import time


class LocalCredential:
    """A TokenCredential for the local emulator: the random token it wrote to its state directory."""

    def __init__(self, token: str):
        self._token = token

    def get_token(self, *scopes: str, **kwargs):
        from azure.core.credentials import AccessToken

        return AccessToken(self._token, int(time.time()) + 3600)

    def __repr__(self) -> str:   # never the token itself
        return "LocalCredential(<emulator token>)"

    def close(self) -> None:
        pass


def azure_credential(authority_host: str | None = None):
    """DefaultAzureCredential signing in at the cloud's authority (`login.microsoftonline.us`, ...: azure.identity's
    AzureAuthorityHosts; None: its default, the public cloud's, or AZURE_AUTHORITY_HOST), without the warnings its
    chain logs when no credential works (some 90 lines on stderr through logging's last-resort handler): the error
    it raises carries the same list, and the command reports it in a few lines (INFRA_DEBUG=1 shows it whole)."""
    from azure.identity import DefaultAzureCredential

    logging.getLogger("azure.identity").addHandler(logging.NullHandler())
    return DefaultAzureCredential(**({"authority": authority_host} if authority_host else {}))

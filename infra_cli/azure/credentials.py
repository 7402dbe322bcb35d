"""Credentials: Azure's DefaultAzureCredential, or a local one for the emulator (which accepts any token)."""

from __future__ import annotations

import time


class LocalCredential:
    """A TokenCredential for the local emulator: a fixed, meaningless bearer token."""

    TOKEN = "infra-local-emulator-token"

    def get_token(self, *scopes: str, **kwargs):
        from azure.core.credentials import AccessToken

        return AccessToken(self.TOKEN, int(time.time()) + 3600)

    def close(self) -> None:
        pass


def azure_credential():
    from azure.identity import DefaultAzureCredential

    return DefaultAzureCredential()

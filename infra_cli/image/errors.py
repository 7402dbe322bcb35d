"""The one error the image reader raises: the image could not be read (exit 2), with why and how to fix."""

from __future__ import annotations

from infra_cli.diagnostics import Diagnostic, DiagnosticError


class ImageReadError(DiagnosticError):
    """The image (or one of its blobs) could not be read or did not verify; `infra image check` exits 2."""

    def __init__(self, message: str, hint: str | None = None, where: str | None = None):
        self.message, self.hint, self.where = message, hint, where
        super().__init__([Diagnostic("error", "image.read", message, file=where, hint=hint)])

"""The one error the image reader raises: the image could not be read (exit 2), with why and how to fix; and
`Stopped`, which ends the reader's own threads and never leaves it."""

from __future__ import annotations

from infra_cli.diagnostics import Diagnostic, DiagnosticError


class ImageReadError(DiagnosticError):
    """The image (or one of its blobs) could not be read or did not verify; `infra image check` exits 2.

    `rule` tells a read failure (image.read) from a request that cannot be met as asked (image.platform)."""

    def __init__(self, message: str, hint: str | None = None, where: str | None = None, rule: str = "image.read"):
        self.message, self.hint, self.where, self.rule = message, hint, where, rule
        super().__init__([Diagnostic("error", rule, message, file=where, hint=hint)])

    def located(self, where: str) -> "ImageReadError":
        """This error naming `where` (the image), unless it already names a place."""
        return self if self.where else ImageReadError(self.message, self.hint, where, self.rule)


class Stopped(Exception):
    """A fetch or walk thread was told to stop: the check ended (verdict reached, a layer refused, out of time)."""

"""What a command writes on the terminal: diagnostics (coloured where the terminal wants colour), an engine's
progress lines, and the live table of apply's changes. Every command it names is rendered for this run
(commands/hints.py)."""

from __future__ import annotations

import os
import sys
from typing import Any

from infra_cli.commands.hints import rendered, rendered_diagnostic
from infra_cli.commands.run import this_run
from infra_cli.diagnostics import Diagnostic

_COLOURS = {"error": "\033[31m", "warning": "\033[33m", "info": "\033[36m"}


def colour_for(stream) -> bool:
    """Colour (and live redrawing) only on a terminal that wants it: NO_COLOR set to anything
    (https://no-color.org) or TERM=dumb (Emacs shells, some CI logs) turns it off, as the run's -no-color does."""
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb" and \
        not this_run().no_color


def print_diagnostics(diagnostics: list[Diagnostic], stream=None) -> None:
    stream = stream or sys.stderr
    colour = colour_for(stream)
    for d in diagnostics:
        d = rendered_diagnostic(d)
        text = d.format()
        if colour:
            text = text.replace(f"{d.severity}[", f"{_COLOURS.get(d.severity, '')}{d.severity}\033[0m[", 1)
        print(text, file=stream)


def progress_stream(stream):
    """A line of an engine's progress, written at once (a pipe would hold it back until the end) and with the
    commands it names as this run needs them (hints.rendered). The run is read here, in the command: an engine may
    write from a thread of its own, which click's context does not follow."""
    run = this_run()

    def write(line: str) -> None:
        print(rendered(line, run), file=stream, flush=True)

    return write


class Progress:
    """Live lines per resource on a terminal (rich); one plain line per change of state otherwise."""

    def __init__(self):
        self.tty = colour_for(sys.stdout)
        self.rows: dict[str, tuple[str, str, float]] = {}
        self.live: Any = None

    def __enter__(self):
        if self.tty:
            from rich.live import Live

            self.live = Live(self._table(), refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.update(self._table())
            self.live.__exit__(*exc)

    def _table(self):
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        for address, (phase, text, elapsed) in self.rows.items():
            mark = {"done": "[green]✓[/]", "failed": "[red]✗[/]", "skipped": "[yellow]-[/]"}.get(phase, "[cyan]…[/]")
            table.add_row(mark, address, text, f"{elapsed:5.1f}s")
        return table

    def __call__(self, event) -> None:
        if self.live is not None:
            self.rows[event.address] = (event.phase, event.text, event.elapsed_s)
            self.live.update(self._table())
        elif self.rows.get(event.address, ("", "", 0.0))[1] != event.text:  # one line per change of state
            self.rows[event.address] = (event.phase, event.text, event.elapsed_s)
            tail = f" [{event.elapsed_s:.1f}s]" if event.phase in ("done", "failed") else ""
            # an event of the whole run (Ctrl-C) has no address: its text alone
            print(f"{event.address}: {event.text}{tail}" if event.address else event.text, flush=True)

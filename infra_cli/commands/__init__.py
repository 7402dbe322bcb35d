"""Floor 4, the command line: one module per command group, each exposing `register(app)`.

A command parses, calls one engine function, renders and maps to an exit code (commands/output.py).
Engines are imported inside the command, so `--help` and the offline commands stay light.
"""

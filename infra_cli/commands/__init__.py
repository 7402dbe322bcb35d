"""Floor 4, the composition root: one module per command group, each exposing `register(app)`.

A command parses, builds the backend (commands/backend.py: Azure or the emulator, the clients and the provider),
calls one engine function, hands its result to a view (commands/views/) and maps to an exit code
(commands/errors.py, commands/terminal.py). Engines are imported inside the command, so `--help` and the offline commands stay light.
"""

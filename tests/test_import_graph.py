"""The floors of docs/ARCHITECTURE.md, checked on the source: no module imports from a higher floor, the
module-level import graph has no cycle, and a function-level import is there only to keep a fast path light
(it loads something heavy: an SDK, torch, jinja2, the emulator...), which tests/test_cli_basics.py measures.
Within a floor, the packages stand in a declared order (SIDEWAYS: the ground's stack under validate, the engines
side by side with apply driving the others through their api.py, azure/ knowing nothing of the emulator), and
the Azure clients and the provider are built only in the composition root (commands/backend.py).

Read from the source with `ast`, so a module that is never imported by the tests is checked all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "infra_cli"

# floor of each top-level part of infra_cli (a package or a module); a new one must be placed here
FLOORS = {
    "commands": 4, "__main__": 4,
    "plan": 3, "apply": 3, "smoke": 3, "image": 3,
    "state": 2, "azure": 2, "emulator": 2,
    "stack": 1, "validate": 1, "knowledge": 1,
    "arguments": 0, "diagnostics": 0, "paths": 0, "build_context": 0, "private_state": 0, "safe_files": 0,
    "conventions": 0, "__init__": 0,
}
# The imports allowed between two packages of one floor (importer, imported), each with why; any other is an
# arrow sideways the layout does not have (stack importing validate, smoke importing plan, azure/ the emulator).
SIDEWAYS = {
    ("__main__", "commands"): "the entry point runs the root command",
    ("paths", "diagnostics"): "a path problem is said as a diagnostic",
    ("diagnostics", "arguments"): "a diagnostic's text names its next steps as commands (NextStep)",
    ("build_context", "paths"): "a build context's files stay inside it (paths.inside)",
    ("private_state", "paths"): "a `.infra/` infra makes is the local project's marker (paths.LOCAL_STATE_MARKERS)",
    ("private_state", "safe_files"): "local state is written through no link (safe_files.open_beneath)",
    ("private_state", "diagnostics"): "an untrusted state directory is said as a diagnostic",
    ("stack", "knowledge"): "the stack model reads sizes, frameworks and launchers",
    ("validate", "stack"): "validate judges a loaded stack",
    ("validate", "knowledge"): "validate's thresholds and facts are knowledge",
    ("state", "azure"): "state is kept on Azure, read and written through the provider",
    ("apply", "plan"): "apply executes plan's result (through plan/api.py)",
    ("apply", "smoke"): "infra render writes the smoke job beside the az ml YAML (smoke/api.py)",
    ("apply", "image"): "a custom environment's build context holds the rendered Dockerfile (image/api.py)",
    ("plan", "image"): "plan --check-images reads images (image/api.py)",
}
ENGINES = ("plan", "apply", "smoke", "image")


def engine_api(package: str) -> str:
    """An engine's declared surface: the one module another engine may import of it, its names listed in
    `__all__`. Anything else of an engine is its own business."""
    return f"infra_cli.{package}.api"


# Calls that build what talks to Azure (SDK clients, the lean reader, the provider, the emulator): made only by
# the composition root and by azure/clients.py, where the clients are defined.
BACKEND_BUILDERS = {"AzureClients", "AzureProvider", "Provider", "MLClient", "ComputeManagementClient", "ArmClient",
                    "build_clients", "build_provider", "provider_for", "azure_clients", "local_clients",
                    "EmulatorServer", "local_emulator", "served_emulator"}
BUILDS_BACKEND = ("infra_cli.commands.", "infra_cli.azure.clients")
# What a function-level import may load lazily: third-party modules that cost start-up time, and the
# infra_cli modules that import one of them when loaded.
# Lazy imports a fast path needs that the rule above cannot see, each with why.
LAZY_BY_DESIGN = {
    ("infra_cli.image.api", "infra_cli.image.check"): "the registry client loads only when plan --check-images runs",
}
# What `infra --help` may load below the commands: the package, one shape of message, and the default of
# `image check --timeout`, which it prints.
# (infra_cli.arguments: the run's typed arguments, a few dataclasses, that every command's parse builds)
HELP_LOADS = {"infra_cli", "infra_cli.arguments", "infra_cli.diagnostics", "infra_cli.image", "infra_cli.image.limits",
              "infra_cli.image.errors"}
# importlib.metadata: ~50 ms of email, zipfile and csv modules that only `infra --version` needs
HEAVY_ROOTS = ("azure", "torch", "jinja2", "rich", "cryptography", "isal", "zstandard", "certifi", "numpy", "packaging",
               "importlib.metadata", "infra_cli.emulator", "infra_cli.azure")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class Imports(ast.NodeVisitor):
    """(target, line, at module level) for each import, TYPE_CHECKING blocks left out."""

    def __init__(self, module: str, is_package: bool):
        self.module, self.is_package = module, is_package
        self.found: list[tuple[str, int, bool]] = []
        self.depth = 0

    def _resolve(self, node: ast.ImportFrom) -> list[str]:
        if not node.level:
            base = node.module or ""
        else:
            parts = self.module.split(".")
            keep = len(parts) - node.level + (1 if self.is_package else 0)
            base = ".".join(parts[:keep] + ([node.module] if node.module else []))
        # `from infra_cli.commands import lifecycle` imports the submodule: count both
        return [base] + [f"{base}.{a.name}" for a in node.names]

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node):
            self.generic_visit(node)

    def _nested(self, node) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _nested

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [(a.name, node.lineno, self.depth == 0) for a in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found += [(t, node.lineno, self.depth == 0) for t in self._resolve(node)]


def all_imports() -> dict[str, list[tuple[str, int, bool]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        visitor = Imports(module_name(path), path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        out[visitor.module] = visitor.found
    return out


IMPORTS = all_imports()
MODULES = set(IMPORTS)


def internal(target: str) -> str | None:
    """The infra_cli module a dotted import names (a name imported from a module maps to the module)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target if target.startswith("infra_cli") else None


def floor(module: str) -> int:
    parts = module.split(".")
    return FLOORS[parts[1] if len(parts) > 1 else "__init__"]


def test_every_module_has_a_floor():
    unplaced = sorted({m.split(".")[1] for m in MODULES if "." in m} - set(FLOORS))
    assert not unplaced, f"place these in a floor (docs/ARCHITECTURE.md and FLOORS here): {unplaced}"


def test_no_module_imports_from_a_higher_floor():
    upward = []
    for module, found in IMPORTS.items():
        for target, line, _ in found:
            inner = internal(target)
            if inner and floor(inner) > floor(module):
                upward.append(f"{module}:{line} (floor {floor(module)}) imports {inner} (floor {floor(inner)})")
    assert not upward, "\n".join(sorted(set(upward)))


def _module_level_graph() -> dict[str, set[str]]:
    graph = {m: set() for m in MODULES}
    for module, found in IMPORTS.items():
        for target, _, top in found:
            inner = internal(target)
            if top and inner and inner != module:
                graph[module].add(inner)
    return graph


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _sideways(imports: dict[str, list[tuple[str, int, bool]]]) -> list[str]:
    out = []
    for module, found in imports.items():
        for target, line, _ in found:
            inner = internal(target)
            if inner is None or floor(inner) != floor(module) or _package(inner) == _package(module):
                continue
            if (_package(module), _package(inner)) not in SIDEWAYS:
                out.append(f"{module}:{line} imports {inner} (same floor, not in SIDEWAYS)")
            elif _package(module) in ENGINES and inner != engine_api(_package(inner)):
                out.append(f"{module}:{line} imports {inner}, which is not its engine's api ({engine_api(_package(inner))})")
    return sorted(set(out))


def test_no_arrow_sideways_but_the_declared_ones():
    """stack/ imports nothing of validate/, azure/ nothing of emulator/ or state/, smoke/ nothing of plan/, and an
    engine reaches another only through its api.py."""
    assert not _sideways(IMPORTS), "\n".join(_sideways(IMPORTS))


def test_azure_knows_nothing_of_the_emulator():
    """The emulator plugs in at the composition root (commands/backend.py): azure/ imports no emulator module,
    not even inside a function."""
    found = [f"{m}:{line} imports {t}" for m, imports in IMPORTS.items() if m.startswith("infra_cli.azure")
             for t, line, _ in imports if t.startswith("infra_cli.emulator")]
    assert not found, "\n".join(found)


def _backend_builds(module: str, tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in BACKEND_BUILDERS:
                out.append(f"{module}:{node.lineno} calls {name}")
    return out


def test_every_engine_api_declares_what_it_offers():
    """An engine's api.py lists its names in `__all__`, and another engine imports only names listed there."""
    problems = []
    for package in ENGINES:
        path = PACKAGE / package / "api.py"
        if not path.exists():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offered = [ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)]
        if not offered:
            problems.append(f"{engine_api(package)} has no __all__")
            continue
        for module in sorted(m for m in MODULES if _package(m) in ENGINES and _package(m) != package):
            for target, line, _ in IMPORTS[module]:
                name = target.removeprefix(engine_api(package) + ".")
                if target.startswith(engine_api(package) + ".") and name not in offered[0]:
                    problems.append(f"{module}:{line} imports {name}, not in {engine_api(package)}.__all__")
    assert not problems, "\n".join(problems)


def test_clients_and_providers_are_built_only_in_the_composition_root():
    """No engine, state or edge module builds SDK clients, the provider or the emulator: the command builds the
    backend once (commands/backend.py) and hands it down."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if not module.startswith(BUILDS_BACKEND):
            found += _backend_builds(module, ast.parse(path.read_text(encoding="utf-8"), str(path)))
    assert not found, "\n".join(found)


@pytest.mark.parametrize("module, source, expected", [
    ("infra_cli.azure.clients", "from infra_cli.emulator.server import EmulatorServer\n", "not in SIDEWAYS"),
    ("infra_cli.stack.model", "from infra_cli.validate.rules.registry import RULES\n", "not in SIDEWAYS"),
    ("infra_cli.smoke.run", "from infra_cli.plan.desired import desired_resources\n", "not in SIDEWAYS"),
    ("infra_cli.apply.engine", "from infra_cli.plan.diff import diff\n", "not its engine's api"),
    ("infra_cli.apply.engine", "from infra_cli.plan.model import Plan\n", "not its engine's api"),
    ("infra_cli.apply.files", "from infra_cli.smoke.job_templates import render_distribution_jobs\n", "not its engine's api"),
    ("infra_cli.plan.image_requirements", "def f():\n    from infra_cli.image.check import check_image\n", "not its engine's api"),
])
def test_the_sideways_check_sees_a_forbidden_import(module, source, expected):
    """The checks above can fail: each import the layout forbids is named."""
    visitor = Imports(module, False)
    visitor.visit(ast.parse(source))
    (problem,) = _sideways({module: visitor.found})
    assert expected in problem


def test_the_builder_check_sees_a_client_built_in_an_engine():
    source = "def f(ws):\n    return AzureProvider(build_clients(ws, local=True))\n"
    found = _backend_builds("infra_cli.apply.engine", ast.parse(source))
    assert found == ["infra_cli.apply.engine:2 calls AzureProvider", "infra_cli.apply.engine:2 calls build_clients"]


def test_no_import_cycle():
    graph = _module_level_graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(cycles)


def _loading(direct: set[str]) -> set[str]:
    """`direct` and every infra_cli module that loads one of them when imported (module-level imports)."""
    graph = _module_level_graph()
    heavy, changed = set(direct), True
    while changed:
        changed = False
        for module, targets in graph.items():
            if module not in heavy and targets & heavy:
                heavy.add(module)
                changed = True
    return heavy


def _heavy_modules() -> set[str]:
    """infra_cli modules that load a heavy module when imported."""
    return _loading({m for m, found in IMPORTS.items()
                     if any(top and t.startswith(HEAVY_ROOTS) for t, _, top in found) or m.startswith(HEAVY_ROOTS)})


def test_function_level_imports_only_keep_a_fast_path_light():
    """Lazy imports are for heavy modules, and for what a command loads only when it runs (so that
    `infra --help` loads nothing below the commands: test_help_loads_no_engine)."""
    heavy = _heavy_modules()
    engines = _loading({m for m in MODULES if floor(m) in (1, 2, 3)})
    light = []
    for module, found in IMPORTS.items():
        for target, line, top in found:
            if top:
                continue
            inner = internal(target)
            if target.startswith(HEAVY_ROOTS) or (inner and inner in heavy):
                continue
            if module.startswith("infra_cli.commands.") and (inner in engines or (inner and floor(inner) < 4)):
                continue
            if (module, inner) in LAZY_BY_DESIGN:
                continue
            if inner is None and target.split(".")[0] != "infra_cli" and not _third_party(target):
                light.append(f"{module}:{line} imports the standard library's {target} inside a function")
            elif inner is not None or _third_party(target):
                light.append(f"{module}:{line} imports {inner or target} inside a function, which loads nothing heavy")
    assert not light, "move these to the top of their module:\n" + "\n".join(sorted(set(light)))


def test_help_loads_no_engine():
    """Why the commands import their engines inside the command: `infra --help` loads nothing below the
    commands but HELP_LOADS."""
    import os
    import re
    import subprocess
    import sys

    # an MLClient made earlier in this test process names its cloud in AZUREML_CURRENT_CLOUD; a user's shell has none
    env = {k: v for k, v in os.environ.items() if k != "AZUREML_CURRENT_CLOUD"}
    env["COLUMNS"] = "60"   # narrower than commands/root_help.py's text: typer draws the help, loading the commands
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "infra_cli", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(re.findall(r"\|\s+(infra_cli[\w.]*)$", done.stderr, re.M))
    assert "infra_cli.commands.lifecycle" in loaded   # the parse works
    engines = sorted(m for m in loaded if floor(m) < 4 and m not in HELP_LOADS)
    assert not engines, f"`infra --help` loads {engines}"


def _third_party(target: str) -> bool:
    import sys

    return target.split(".")[0] not in sys.stdlib_module_names


@pytest.mark.parametrize("bad, expected", [
    ("from infra_cli.commands.errors import fail\n", "imports infra_cli.commands.errors"),
])
def test_the_check_sees_an_upward_import(tmp_path, bad, expected):
    """The visitor finds an import a floor-1 module must not make (the test above can fail)."""
    visitor = Imports("infra_cli.stack.load", False)
    visitor.visit(ast.parse(bad))
    inner = internal(visitor.found[0][0])
    assert inner == "infra_cli.commands.errors" and floor(inner) > floor("infra_cli.stack.load")

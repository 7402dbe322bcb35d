"""No module of infra_cli over MAX_LINES lines (issue 42): a module that long holds two concerns, and is split by
concern into modules named for what they are (as stack/fields.py, stack/model.py, stack/source.py and paths.py
were), its callers importing each name from where it is defined."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "infra_cli"
MAX_LINES = 600


def too_long(root: Path, limit: int = MAX_LINES) -> list[str]:
    """'PATH: N lines' for each .py file below `root` longer than `limit` lines, longest first."""
    counts = [(len(p.read_text(encoding="utf-8").splitlines()), p) for p in root.rglob("*.py")]
    return [f"{p.relative_to(root.parent)}: {n} lines" for n, p in sorted(counts, reverse=True) if n > limit]


def test_no_module_is_over_the_limit():
    long = too_long(PACKAGE)
    assert not long, f"split these by concern (at most {MAX_LINES} lines a module): " + ", ".join(long)


def test_the_check_sees_a_long_module(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * MAX_LINES)
    (package / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert too_long(package) == [f"pkg/sub/long.py: {MAX_LINES + 1} lines"]

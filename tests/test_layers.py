"""The layers of grader/: each package imports only from the packages below it.

Read from the source with `ast` (module-level and function-level imports alike),
so an arrow that runs back up fails here before it reaches a review.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

# Lowest first. The sandbox is the bottom layer: it is the one part copied into the
# worker, so it may import nothing of the grader outside itself (stdlib and torch only).
LAYERS = ("sandbox", "core", "intake", "harness", "storage", "render", "pipeline", "ship", "cli")
GRADER = ROOT / "grader"


def _imports(path: Path) -> set[str]:
    """The grader modules a file imports, as dotted names (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "grader" or name.startswith("grader.")}


def _layer(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_every_module_lives_in_a_layer():
    loose = [p.name for p in GRADER.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules outside the layer packages: {loose}"
    assert sorted(p.name for p in GRADER.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(LAYERS)


def test_no_import_runs_up_the_layers():
    wrong = []
    for path in sorted(GRADER.rglob("*.py")):
        here = _layer(".".join(path.relative_to(ROOT).with_suffix("").parts))
        if here is None:
            continue
        for name in sorted(_imports(path)):
            there = _layer(name)
            if there is not None and LAYERS.index(there) > LAYERS.index(here):
                wrong.append(f"{path.relative_to(ROOT)} ({here}) imports {name} ({there})")
    assert wrong == [], "\n".join(wrong)


def test_the_sandbox_imports_nothing_of_the_grader_outside_itself():
    outside = [f"{path.relative_to(ROOT)} imports {name}"
               for path in sorted((GRADER / "sandbox").glob("*.py"))
               for name in sorted(_imports(path))
               if name not in ("grader", "grader.sandbox") and not name.startswith("grader.sandbox.")]
    assert outside == [], "\n".join(outside)


def test_records_storage_and_rendering_do_not_pull_in_torch_or_pytest():
    light = [GRADER / "core" / "records.py", *sorted((GRADER / "storage").glob("*.py"))]
    for path in light:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        roots = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
        roots |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        heavy = roots & {"torch", "pytest", "triton"}
        assert not heavy, f"{path.relative_to(ROOT)} imports {heavy}"


def test_the_check_itself_sees_an_upward_import(tmp_path, monkeypatch):
    """A test that cannot fail is a defect: plant an upward import and watch it be found."""
    planted = GRADER / "core" / "_planted_for_test.py"
    planted.write_text("from grader.pipeline.grading import grade\n")
    try:
        try:
            test_no_import_runs_up_the_layers()
        except AssertionError as exc:
            assert "core/_planted_for_test.py (core) imports grader.pipeline.grading (pipeline)" in str(exc)
        else:
            raise AssertionError("the layer test missed an upward import")
    finally:
        planted.unlink()

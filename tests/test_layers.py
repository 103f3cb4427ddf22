"""The shape of grader/: layers that import only downward, no circles, modules of one job.

Read from the source with `ast` (module-level and function-level imports alike), so an
arrow that runs back up, or two modules that import each other, fail here before they
reach a review. Each check takes the tree it reads, so the tests that prove a check can
fail plant their mistake in a copy of grader/, never in the working tree.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT

# Lowest first. The sandbox is the bottom layer: it is the one part copied into the
# worker, so it may import nothing of the grader outside itself (stdlib and torch only).
LAYERS = ("sandbox", "core", "intake", "harness", "storage", "render", "lms", "pipeline", "authoring", "ship", "serve",
          "cli")
GRADER = ROOT / "grader"
MODULE_LINES = 600  # a longer module says at its top why it is one module (SIZE_REASON)
SIZE_REASON = "# One module because"


def _dotted(root: Path, path: Path) -> str:
    """grader/intake/kernels.py under `root` → grader.intake.kernels (a package → its name)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(root: Path) -> dict[str, Path]:
    """Every module of the grader package under `root` (its parent folder), by dotted name."""
    return {_dotted(root, path): path for path in sorted((root / "grader").rglob("*.py"))}


def _imports(root: Path, path: Path) -> set[str]:
    """The grader names a file imports, as dotted names (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parts = path.relative_to(root).with_suffix("").parts
    package = list(parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "grader" or name.startswith("grader.")}


def _imported_modules(root: Path, path: Path, modules: dict[str, Path]) -> set[str]:
    """The grader modules a file imports (a name imported from a module is that module)."""
    found = set()
    for imported in _imports(root, path):
        while imported not in modules and "." in imported:
            imported = imported.rsplit(".", 1)[0]
        if imported in modules:
            found.add(imported)
    return found


def _module_imports(root: Path) -> dict[str, set[str]]:
    """Module → the grader modules it imports, packages' __init__ files left aside."""
    modules = _modules(root)
    return {name: {m for m in _imported_modules(root, path, modules)
                   if m != name and modules[m].name != "__init__.py"}
            for name, path in modules.items()}


def _layer(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def upward_imports(root: Path) -> list[str]:
    """Each import of a module from a layer above its own."""
    wrong = []
    modules = _modules(root)
    for name, path in modules.items():
        here = _layer(name)
        if here is None:
            continue
        for imported in sorted(_imported_modules(root, path, modules)):
            there = _layer(imported)
            if there is not None and LAYERS.index(there) > LAYERS.index(here):
                wrong.append(f"{path.relative_to(root)} ({here}) imports {imported} ({there})")
    return wrong


def import_circles(root: Path) -> list[list[str]]:
    """Each group of modules that import one another, directly or through others (Tarjan)."""
    graph = _module_imports(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(start: str) -> None:  # iterative, so a long chain cannot exhaust the stack
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        circles.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(circles)


def long_modules(root: Path) -> list[str]:
    """Modules over MODULE_LINES lines that do not say at their top why they are one module."""
    found = []
    for path in _modules(root).values():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MODULE_LINES and not any(line.startswith(SIZE_REASON) for line in lines[:60]):
            found.append(f"{path.relative_to(root)}: {len(lines)} lines")
    return found


ONE_GRADING_PATH = "grader.pipeline.record"  # grade_and_record: every grade goes through it (docs/ARCHITECTURE.md)


def grade_callers(root: Path) -> list[str]:
    """Modules other than ONE_GRADING_PATH that reach grading.grade themselves (by importing the name, or
    as `grading.grade`), so that a grade would bypass the sinks grade_and_record delivers to."""
    found = []
    for name, path in _modules(root).items():
        if name in (ONE_GRADING_PATH, "grader.pipeline.grading"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        attribute = any(isinstance(node, ast.Attribute) and node.attr == "grade" and isinstance(node.value, ast.Name)
                        and node.value.id == "grading" for node in ast.walk(tree))
        if "grader.pipeline.grading.grade" in _imports(root, path) or attribute:
            found.append(name)
    return sorted(found)


def test_every_grade_goes_through_grade_and_record():
    assert grade_callers(ROOT) == []


def test_every_module_lives_in_a_layer():
    loose = [p.name for p in GRADER.glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules outside the layer packages: {loose}"
    assert sorted(p.name for p in GRADER.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(LAYERS)


def test_no_import_runs_up_the_layers():
    assert upward_imports(ROOT) == []


def test_no_modules_import_each_other():
    """Within a layer as across layers: the imports between grader's modules form no circle."""
    assert import_circles(ROOT) == []


def test_a_long_module_says_why_it_is_one():
    assert long_modules(ROOT) == []


def test_the_sandbox_imports_nothing_of_the_grader_outside_itself():
    outside = [f"{path.relative_to(ROOT)} imports {name}"
               for path in sorted((GRADER / "sandbox").glob("*.py"))
               for name in sorted(_imports(ROOT, path))
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


# A test that cannot fail is a defect: each check is shown its mistake in a copy of grader/.

@pytest.fixture()
def grader_copy(tmp_path) -> Path:
    shutil.copytree(GRADER, tmp_path / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_the_check_sees_an_upward_import(grader_copy):
    (grader_copy / "grader" / "core" / "planted.py").write_text("from grader.pipeline.grading import grade\n")
    assert upward_imports(grader_copy) == [
        "grader/core/planted.py (core) imports grader.pipeline.grading (pipeline)"]


def test_the_check_sees_a_circle_inside_a_layer(grader_copy):
    pipeline = grader_copy / "grader" / "pipeline"
    (pipeline / "planted_a.py").write_text("from grader.pipeline.planted_b import b\n\ndef a():\n    return b\n")
    (pipeline / "planted_b.py").write_text("def b():\n    from . import planted_c\n    return planted_c\n")
    (pipeline / "planted_c.py").write_text("from .planted_a import a\n")
    assert import_circles(grader_copy) == [
        ["grader.pipeline.planted_a", "grader.pipeline.planted_b", "grader.pipeline.planted_c"]]


def test_the_check_sees_a_long_module_without_a_reason(grader_copy):
    core = grader_copy / "grader" / "core"
    body = "".join(f"VALUE_{n} = {n}\n" for n in range(MODULE_LINES + 1))
    (core / "planted_long.py").write_text('"""Many values."""\n' + body)
    (core / "planted_reasoned.py").write_text(f'"""Many values."""\n{SIZE_REASON} the table is one.\n' + body)
    assert long_modules(grader_copy) == [f"grader/core/planted_long.py: {MODULE_LINES + 2} lines"]


def test_the_check_sees_a_grade_outside_the_one_path(grader_copy):
    ship = grader_copy / "grader" / "ship"
    (ship / "planted.py").write_text("def run(a, s, r):\n    from grader.pipeline.grading import grade\n"
                                     "    return grade(a, s, r)\n")
    (ship / "planted_too.py").write_text("from grader.pipeline import grading\n\n\ndef run(a, s, r):\n"
                                         "    return grading.grade(a, s, r)\n")
    assert grade_callers(grader_copy) == ["grader.ship.planted", "grader.ship.planted_too"]

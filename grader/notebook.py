"""A Jupyter notebook → the student's modules.

Code cells are read with nbformat; from each cell we keep the top-level
statements that define something (imports, functions, classes, constants)
and drop the rest (prints, plots, experiments), so exploring in a notebook
does not run during grading. Cell magics and shell lines are removed.
A cell that does not parse is skipped, and the skip is noted in the source.
"""

from __future__ import annotations

import ast

import nbformat

from grader.errors import SubmissionError

KEPT = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom,
        ast.Assign, ast.AnnAssign)


def _strip_magics(source: str) -> str:
    if source.lstrip().startswith("%%"):
        return ""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def _is_definition(node: ast.stmt) -> bool:
    if not isinstance(node, KEPT):
        return False
    if isinstance(node, ast.Assign | ast.AnnAssign):  # keep `x = 3`, drop `fig = plt.figure()`
        value = node.value
        return value is None or not any(isinstance(n, ast.Call) for n in ast.walk(value)) or \
            all(isinstance(n.func, ast.Attribute | ast.Name) and
                ast.unparse(n.func).startswith(("torch.", "math.", "tl.", "triton."))
                for n in ast.walk(value) if isinstance(n, ast.Call))
    return True


def _segment(lines: list[str], node: ast.stmt) -> str:
    """A statement's source lines, decorators included."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return "\n".join(lines[start - 1 : node.end_lineno])


def assemble_source(notebook_bytes: bytes, label: str = "notebook") -> str:
    """The module source assembled from a notebook's defining code cells."""
    try:
        notebook = nbformat.reads(notebook_bytes.decode("utf-8", errors="replace"), as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types for bad input
        raise SubmissionError(f"{label} is not a readable Jupyter notebook "
                              f"({type(exc).__name__}: {str(exc)[:120]})") from exc
    chunks = [f"# assembled from {label} by the grader: definitions only\n"]
    for index, cell in enumerate(notebook.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source = _strip_magics(cell.get("source", ""))
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            chunks.append(f"# cell {index + 1} skipped: it does not parse "
                          f"({exc.msg}, line {exc.lineno})\n")
            continue
        lines = source.splitlines()
        kept = [_segment(lines, node) for node in tree.body if _is_definition(node)]
        if kept:
            chunks.append(f"# --- cell {index + 1}\n" + "\n\n".join(kept) + "\n")
    return "\n".join(chunks)


def modules_from_notebook(notebook_bytes: bytes, module_files: tuple[str, ...],
                          label: str = "notebook") -> dict[str, bytes]:
    """Every module of the assignment gets the notebook's definitions."""
    source = assemble_source(notebook_bytes, label).encode()
    return {name: source for name in module_files}

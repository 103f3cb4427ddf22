"""A Jupyter notebook → the student's modules.

From each code cell we keep the top-level statements that define something
(imports, functions, classes, constants) and drop the rest (prints, plots,
experiments), so exploring in a notebook does not run during grading. Cell
magics and shell lines are removed. A cell that does not parse is skipped,
and the skip is noted in the source.

The notebook is read with bounded memory, without nbformat: its size is
capped before it is read, the number of JSON values is counted before it is
parsed (so a small file cannot expand into millions of objects), only
nbformat 4 is accepted, only the cells' type and source are kept, and a code
cell larger than MAX_CELL_BYTES is refused before the grader parses it.
Every problem is one SubmissionError: "<name> is not a readable Jupyter
notebook: <what>; <what to do>".

Quiz answers travel in the notebook too: a cell tagged `answers` (cell
metadata `"tags": ["answers"]`, best a raw cell; a markdown cell may fence
its text in ```toml) holds the text of answers.toml. It is never part of
the assembled code; the released notebook carries it blank.
"""

from __future__ import annotations

import ast
import json
import re

from grader.core.compat import with_deep_stack
from grader.core.errors import SubmissionError
from grader.core.text import one_line

MAX_NOTEBOOK_BYTES = 20 * 1024 * 1024  # the .ipynb file
MAX_JSON_VALUES = 1_000_000  # values (numbers, strings, lists, objects) in the file
MAX_CELLS = 5000
MAX_CELL_BYTES = 256 * 1024  # one code cell's source (the grader parses it): as submission.MAX_SOURCE_BYTES
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)

ANSWERS_TAG = "answers"  # the tag of the cell holding the quiz answers (TOML, as in answers.toml)
_FENCE = re.compile(r"^\s*(```|~~~)[^\n]*\n(?P<body>.*?)^\s*\1\s*$", re.DOTALL | re.MULTILINE)

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


def _unreadable(label: str, problem: str, fix: str = "open it in Jupyter and save it again") -> SubmissionError:
    return SubmissionError(f"{label} is not a readable Jupyter notebook: {problem}; {fix}")


def _tags(cell: dict) -> tuple[str, ...]:
    metadata = cell.get("metadata")
    tags = metadata.get("tags") if isinstance(metadata, dict) else None
    return tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else ()


def read_tagged_cells(notebook_bytes: bytes, label: str = "notebook") -> list[tuple[str, str, tuple[str, ...]]]:
    """(cell type, source, tags) of every cell of an nbformat 4 notebook, read with bounded memory."""
    if len(notebook_bytes) > MAX_NOTEBOOK_BYTES:
        raise _unreadable(label, f"it is larger than {MAX_NOTEBOOK_BYTES // (1024 * 1024)} MiB",
                          "clear the outputs (Restart & Clear Output) and save it again")
    skeleton = _JSON_STRING.sub(b"", notebook_bytes)  # what is left outside strings: structure and numbers
    values = skeleton.count(b",") + skeleton.count(b"[") + skeleton.count(b"{")
    del skeleton
    if values > MAX_JSON_VALUES:
        raise _unreadable(label, f"it holds more than {MAX_JSON_VALUES} JSON values",
                          "clear the outputs (Restart & Clear Output) and save it again")
    try:
        text = notebook_bytes.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _unreadable(label, f"it is not UTF-8 text (byte {exc.start})") from exc
    try:
        notebook = json.loads(text)
    except RecursionError as exc:
        raise _unreadable(label, "its JSON is nested too deeply") from exc
    except ValueError as exc:  # JSONDecodeError, and numbers too long to convert
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise _unreadable(label, f"it is not valid JSON{where}") from exc
    del text
    if not isinstance(notebook, dict):
        raise _unreadable(label, "it is not a JSON object")
    version = notebook.get("nbformat")
    if type(version) is not int:
        raise _unreadable(label, "it has no nbformat version")
    if version != 4:
        raise _unreadable(label, f"it is nbformat {version}, and the grader reads nbformat 4",
                          "open it in a current Jupyter and save it again")
    cells = notebook.get("cells")
    if not isinstance(cells, list):
        raise _unreadable(label, "it has no list of cells")
    if len(cells) > MAX_CELLS:
        raise _unreadable(label, f"it has {len(cells)} cells, more than {MAX_CELLS}", "merge or delete cells")
    found = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise _unreadable(label, f"cell {number} is not a JSON object")
        kind, source = cell.get("cell_type"), cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(kind, str) or not isinstance(source, str):
            raise _unreadable(label, f"cell {number} has no cell_type or source text")
        if kind == "code" and len(source) > MAX_CELL_BYTES // 4 and len(source.encode()) > MAX_CELL_BYTES:
            raise _unreadable(label, f"code cell {number} holds more than {MAX_CELL_BYTES // 1024} KiB of code",
                              "move data out of the code, or split the cell")
        found.append((kind, source, _tags(cell)))
    return found


def _parse(source: str) -> tuple[ast.Module | None, str]:
    """The cell's syntax tree, or why there is none (never raises)."""
    try:
        return with_deep_stack(ast.parse, source), ""
    except SyntaxError as exc:
        return None, f"{exc.msg}, line {exc.lineno}"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return None, type(exc).__name__


def assemble_source(notebook_bytes: bytes, label: str = "notebook") -> str:
    """The module source assembled from a notebook's defining code cells."""
    cells = read_tagged_cells(notebook_bytes, label)
    chunks = [f"# assembled from {one_line(label, 120)} by the grader: definitions only\n"]
    for index, (kind, cell_source, tags) in enumerate(cells):
        if kind != "code" or ANSWERS_TAG in tags:
            continue
        source = _strip_magics(cell_source)
        tree, problem = _parse(source)
        if tree is None:
            chunks.append(f"# cell {index + 1} skipped: it does not parse ({problem})\n")
            continue
        lines = source.splitlines()
        kept = [_segment(lines, node) for node in tree.body if _is_definition(node)]
        if kept:
            chunks.append(f"# --- cell {index + 1}\n" + "\n\n".join(kept) + "\n")
    return "\n".join(chunks)


def answers_from_notebook(notebook_bytes: bytes, label: str = "notebook") -> str | None:
    """The quiz answers (answers.toml text) of the cells tagged `answers`, in order; None when none is."""
    texts = []
    for kind, source, tags in read_tagged_cells(notebook_bytes, label):
        if ANSWERS_TAG not in tags:
            continue
        fenced = _FENCE.search(source) if kind == "markdown" else None
        texts.append(fenced.group("body") if fenced else source)
    return "".join(text.rstrip("\n") + "\n" for text in texts) if texts else None


def modules_from_notebook(notebook_bytes: bytes, module_files: tuple[str, ...],
                          label: str = "notebook") -> dict[str, bytes]:
    """Every module of the assignment gets the notebook's definitions."""
    source = assemble_source(notebook_bytes, label).encode()
    return {name: source for name in module_files}

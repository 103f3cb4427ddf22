"""The handout's points table: written from the manifest, and checked against it.

Points live in the manifest alone; a handout that lists them again is a second copy, which
drifts. `grade new` writes the table from the manifest (`points_table`), and `grade validate`
reads every Markdown table of the handout that has a `task` column and a `points` column
(`table_problems`) and checks each row against the manifest: the task exists, its points
(`+5` for a bonus task), a total row, every task listed, and, in a `function` column, that a
signature written as `name(a, b=None)` has the stub's parameters.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from grader.core.manifest import Manifest, Task

GENERATED_MARK = "<!-- points table: written from assignment.toml; grade validate checks it against the manifest -->"
_MARKUP = re.compile(r"[`*]")
_CALL = re.compile(r"`([A-Za-z_]\w*)\(([^`]*)\)`")


@dataclass(frozen=True)
class Table:
    """One Markdown table of the handout: its header cells, its rows, the line of each row."""

    header: tuple[str, ...]
    rows: tuple[tuple[int, tuple[str, ...]], ...]


def _cells(line: str) -> tuple[str, ...]:
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def _plain(cell: str) -> str:
    return _MARKUP.sub("", cell).strip()


def tables(text: str) -> Iterator[Table]:
    """The Markdown tables of `text` (a header row, a |---| row, then rows)."""
    lines = text.splitlines()
    index = 0
    while index < len(lines) - 1:
        line, rule = lines[index].strip(), lines[index + 1].strip()
        if line.startswith("|") and rule.startswith("|") and set(rule) <= set("|-: "):
            rows = []
            cursor = index + 2
            while cursor < len(lines) and lines[cursor].strip().startswith("|"):
                rows.append((cursor + 1, _cells(lines[cursor])))
                cursor += 1
            yield Table(tuple(_plain(c).lower() for c in _cells(line)), tuple(rows))
            index = cursor
        else:
            index += 1


def _points_text(task: Task) -> str:
    return f"+{task.points:g}" if task.bonus else f"{task.points:g}"


def _what(task: Task, manifest: Manifest, signatures: dict[str, str]) -> str:
    if task.kind == "quiz":
        return "`answers.toml` (the questions are in `quiz.toml`)"
    shown = [f"`{signatures.get(name, name)}`" for name in task.functions]
    if task.kind == "timing":
        return "timed on a GPU: " + (", ".join(shown) or ", ".join(f"`{n}`" for n in task.uses))
    return ", ".join(shown) or ", ".join(f"`{n}`" for n in task.uses)


def points_table(manifest: Manifest, signatures: dict[str, str] | None = None) -> str:
    """The handout's points table, from the manifest (`signatures`: function → `name(a, b)` as written)."""
    signatures = signatures or {}
    lines = [GENERATED_MARK, "", "| task | what you write | points |", "|---|---|---|"]
    for task in manifest.tasks:
        lines.append(f"| `{task.id}` | {_what(task, manifest, signatures)} | {_points_text(task)} |")
    total = f"**{manifest.max_points:g}**" + (f" (+{manifest.bonus_points:g} bonus)" if manifest.bonus_points else "")
    lines.append(f"| | **total** | {total} |")
    return "\n".join(lines) + "\n"


def _number(cell: str) -> tuple[float, bool] | None:
    """(points, written as a bonus '+N') from a points cell, or None when it holds no number."""
    match = re.match(r"^\s*(\+)?\s*(\d+(?:\.\d+)?)", _plain(cell))
    return (float(match.group(2)), bool(match.group(1))) if match else None


def _parameters(text: str) -> list[str] | None:
    """The parameter names of `a, b=None, *, c=1` (a signature written in a handout), or None."""
    try:
        tree = ast.parse(f"def _({text}): pass")
    except SyntaxError:
        try:  # written as a call: name(q, k, mask=None)
            call = ast.parse(f"_({text})", mode="eval").body
        except SyntaxError:
            return None
        if not isinstance(call, ast.Call) or not all(isinstance(a, ast.Name) for a in call.args):
            return None
        return [a.id for a in call.args] + [k.arg for k in call.keywords if k.arg]
    arguments = tree.body[0].args  # type: ignore[attr-defined]
    return [a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)]


def table_problems(text: str, manifest: Manifest, parameters: dict[str, list[str]],
                   where: str) -> tuple[list[str], int]:
    """Where the handout's points tables disagree with the manifest (empty when they agree), and how
    many points tables it has. `parameters`: function → the stub's parameter names."""
    problems = []
    checked = 0
    for table in tables(text):
        if "points" not in table.header or not any("task" == h for h in table.header):
            continue
        checked += 1
        task_column, points_column = table.header.index("task"), table.header.index("points")
        listed = set()
        for line, cells in table.rows:
            if len(cells) <= max(task_column, points_column):
                continue
            name, points = _plain(cells[task_column]), _number(cells[points_column])
            if manifest.has_task(name):
                task = manifest.task(name)
                listed.add(name)
                if points is None or points[0] != task.points or (points[1] and not task.bonus):
                    problems.append(f"{where}:{line}: the table gives task {name} "
                                    f"{cells[points_column].strip() or 'no points'}; the manifest gives it "
                                    f"{_points_text(task)}")
            elif re.fullmatch(r"[A-Za-z_]\w*", name) and points is not None:
                problems.append(f"{where}:{line}: the table names task {name}, which the manifest does not have "
                                f"(tasks: {', '.join(t.id for t in manifest.tasks)})")
            elif "total" in " ".join(_plain(c).lower() for c in cells) and points is not None \
                    and points[0] != manifest.max_points:
                problems.append(f"{where}:{line}: the table's total is {points[0]:g}; the manifest's tasks add up "
                                f"to {manifest.max_points:g}")
            for cell in cells:
                for function, written in _CALL.findall(cell):
                    stub = parameters.get(function)
                    shown = _parameters(written)
                    if stub is not None and shown is not None and shown != stub:
                        problems.append(f"{where}:{line}: the table writes {function}({written}); the stub's "
                                        f"parameters are ({', '.join(stub)})")
        if listed:
            missing = [t.id for t in manifest.tasks if t.id not in listed]
            if missing:
                problems.append(f"{where}: the points table leaves out task(s) {', '.join(missing)}")
    return problems, checked

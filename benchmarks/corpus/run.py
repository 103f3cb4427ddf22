"""Grade the corpus of real attention code (benchmarks/corpus/corpus.toml) through `grade submit`.

Each entry's upstream definitions are read from a local folder of sources (nothing is
downloaded), checked against their pinned sha256, written into a student workspace as
the helper module `corpus_<entry>`, and bound to the course's names by the entry's
wrapper (wrappers/<entry>.py). Every other function is the reference's, so a task loses
points only through the upstream code. The workspace is graded by the `grade` command
like any submission; the record it writes (a private gradebook) is read back.

    python benchmarks/corpus/run.py --sources DIR [--only ID ...] [--jobs 2]
    python benchmarks/corpus/run.py --sources DIR --pin     # print each piece's sha256

SOURCES (default: $GRADE_CORPUS_SOURCES, else benchmarks/corpus/sources/) holds each
upstream file as <owner>/<repo>/<path>, at the commit the entry names. Prints one row per
entry and task: source, task, expected, score, and what the grade says (the misconception
named, the forbidden API, or the first failure's words). Exit 1 if an entry's grade is not
what corpus.toml expects.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.core.compat import tomllib  # noqa: E402

CORPUS = HERE / "corpus.toml"
WRAPPERS = HERE / "wrappers"
SOURCES_ENV = "GRADE_CORPUS_SOURCES"
DEFAULT_SOURCES = HERE / "sources"
GRADE_TIMEOUT_S = 1200


class CorpusError(Exception):
    """An entry that cannot be assembled: its source is missing or is not the pinned text."""


@dataclass(frozen=True)
class Entry:
    id: str
    assignment: str
    repo: str
    commit: str
    path: str
    licence: str
    imports: tuple[str, ...]
    pieces: tuple[dict, ...]
    provides: dict[str, str]
    expected: dict[str, str]
    why: str

    @property
    def source(self) -> str:
        return f"{self.repo}@{self.commit[:10]}"


@dataclass
class Row:
    """What one task of one entry got."""

    entry: Entry
    task: str
    expected: str
    earned: float | None = None
    points: float | None = None
    status: str = ""  # the task's status (graded, forbidden, ...) or why the entry was not graded
    explanation: str = ""  # the diagnosis, the forbidden API, or the first failure's words
    diagnoses: list[str] = field(default_factory=list)  # mutant ids named on this task's failures
    explained: bool = False  # every failure of the task says what to change and cites a section

    @property
    def as_expected(self) -> bool:
        if self.earned is None or self.points is None:
            return False
        if self.expected == "full":
            return self.earned >= self.points
        return self.earned < self.points and self.explained


def load_entries(path: Path = CORPUS) -> list[Entry]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [Entry(id=e["id"], assignment=e["assignment"], repo=e["repo"], commit=e["commit"], path=e["path"],
                  licence=e["licence"], imports=tuple(e.get("imports", ())), pieces=tuple(e["pieces"]),
                  provides=dict(e["provides"]), expected=dict(e["expected"]), why=e.get("why", ""))
            for e in data["entry"]]


def sources_dir(explicit: str | Path | None = None) -> Path:
    return Path(explicit or os.environ.get(SOURCES_ENV) or DEFAULT_SOURCES)


def _upstream_file(entry: Entry, sources: Path) -> Path:
    return sources / entry.repo / entry.path


def available(entry: Entry, sources: Path) -> bool:
    return _upstream_file(entry, sources).is_file()


_PARSING = threading.Lock()


def _named_block(text: str, name: str) -> str:
    """The source of the function or class `name` (the first one, nested ones included), with its
    decorators, dedented."""
    lines = text.splitlines()
    with _PARSING:  # CPython 3.11's parser is not safe in two threads at once (AST recursion depth mismatch)
        tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return textwrap.dedent("\n".join(lines[first - 1:node.end_lineno])) + "\n"
    raise CorpusError(f"no definition named {name}")


def piece_text(entry: Entry, piece: dict, sources: Path) -> str:
    """The upstream text of one piece, exactly as taken (before any wrapping)."""
    path = _upstream_file(entry, sources)
    if not path.is_file():
        raise CorpusError(f"missing source {path} ({entry.repo} at {entry.commit}, {entry.path})")
    text = path.read_text(encoding="utf-8")
    if "name" in piece:
        return _named_block(text, piece["name"])
    first, last = piece["lines"]
    return textwrap.dedent("\n".join(text.splitlines()[first - 1:last])) + "\n"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def helper_module(entry: Entry, sources: Path) -> str:
    """The text of `corpus_<entry>.py`: the imports the pieces need, then the pieces, each checked
    against its pinned sha256; statement pieces wrapped in the entry's function."""
    parts = [f'"""{entry.repo} at {entry.commit}, {entry.path} ({entry.licence}): the definitions '
             f'benchmarks/corpus/run.py takes from it, verbatim."""\n', *[line + "\n" for line in entry.imports]]
    for piece in entry.pieces:
        text = piece_text(entry, piece, sources)
        label = piece.get("name") or f"lines {piece['lines'][0]}-{piece['lines'][1]}"
        if sha256(text) != piece.get("sha256"):
            raise CorpusError(f"{entry.id}: {label} of {entry.path} is not the pinned text "
                              f"(sha256 {sha256(text)[:12]}, pinned {str(piece.get('sha256'))[:12]}): "
                              f"is the file at commit {entry.commit}?")
        if "wrap" in piece:
            text = f"{piece['wrap']}\n{textwrap.indent(text, '    ')}    return {piece['returns']}\n"
        parts.append("\n\n" + text)
    return "".join(parts)


def build_workspace(entry: Entry, sources: Path, folder: Path) -> Path:
    """The reference as a workspace, the helper module beside it, the wrapper appended to the module
    that defines each provided function, and the course's names bound to the wrapper's."""
    from grader.authoring.validate import defining_file, reference_workspace
    from grader.core.assignment import Assignment
    from grader.core.course import Course

    course = Course(ROOT)
    assignment = Assignment.load(course, entry.assignment)
    manifest = assignment.manifest
    workspace = reference_workspace(assignment, folder)
    (workspace / f"corpus_{entry.id}.py").write_text(helper_module(entry, sources), encoding="utf-8")
    wrapper = (WRAPPERS / f"{entry.id}.py").read_text(encoding="utf-8")
    by_file: dict[str, list[str]] = {}
    for function, bound in entry.provides.items():
        by_file.setdefault(defining_file(manifest, course.reference_for(entry.assignment), function), []).append(
            f"{function} = {bound}")
    for filename, bindings in by_file.items():
        with open(workspace / filename, "a", encoding="utf-8") as fh:
            fh.write(f"\n\n# --- corpus entry {entry.id}: {entry.source}\n{wrapper}\n" + "\n".join(bindings) + "\n")
    return workspace


def _student(entry: Entry) -> str:
    return f"corpus-{entry.id}"


def grade_entry(entry: Entry, sources: Path, folder: Path) -> tuple[dict | None, str]:
    """(the recorded GradeResult as a dict, "") or (None, why it could not be graded)."""
    try:
        workspace = build_workspace(entry, sources, folder / "work")
    except CorpusError as exc:
        return None, str(exc)
    gradebook = folder / "gradebook.sqlite"
    command = [sys.executable, "-m", "grader.cli", "--course", str(ROOT), "submit", entry.assignment,
               "--workspace", str(workspace), "--student", _student(entry), "--gradebook", str(gradebook),
               "--html", str(folder / "report.html"), "--json", str(folder / "results.json"),
               "--allow-weak-sandbox"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=GRADE_TIMEOUT_S, cwd=ROOT)
    if done.returncode != 0:
        return None, f"grade submit exited {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
    with sqlite3.connect(gradebook) as db:
        (result_json,) = db.execute("SELECT result_json FROM submissions ORDER BY id DESC LIMIT 1").fetchone()
    return json.loads(result_json), ""


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def rows_for(entry: Entry, result: dict | None, problem: str) -> list[Row]:
    rows = []
    for task_id, expected in entry.expected.items():
        row = Row(entry, task_id, expected)
        rows.append(row)
        if result is None:
            row.status, row.explanation = "not graded", problem
            continue
        task = next(t for t in result["score"]["tasks"] if t["task_id"] == task_id)
        row.earned, row.points, row.status = task["earned"], task["points"], task["status"]
        failures = [o for o in result["outcomes"] if o["task"] == task_id and o["status"] == "failed"]
        row.diagnoses = sorted({(o.get("diagnosis") or {}).get("id") for o in failures} - {None})
        if task["status"] == "forbidden":
            row.explanation = f"forbidden: {task['reason']}"
            row.explained = bool(task["reason"])
        elif failures:
            named = next((o["diagnosis"] for o in failures if o.get("diagnosis")), None)
            row.explanation = (f"{named['title']} ({named['section']})" if named
                               else _first_line(failures[0]["message"]))
            row.explained = all(o["message"].strip() and "§" in o["message"] for o in failures)
        else:
            row.explanation = "all tests passed" if row.earned >= row.points else task.get("reason", "")
    return rows


def run(entries: list[Entry], sources: Path, jobs: int = 2) -> list[Row]:
    """Grade every entry (`jobs` at once); one Row per entry and expected task, in corpus order."""
    with tempfile.TemporaryDirectory(prefix="grade-corpus-") as temp, ThreadPoolExecutor(jobs) as pool:
        graded = list(pool.map(lambda e: grade_entry(e, sources, Path(temp) / e.id), entries))
    return [row for entry, (result, problem) in zip(entries, graded, strict=True)
            for row in rows_for(entry, result, problem)]


def table(rows: list[Row]) -> str:
    header = ("source", "entry", "task", "expected", "score", "as expected", "what the grade says")
    body = [(r.entry.source, r.entry.id, r.task, r.expected,
             "-" if r.earned is None else f"{r.earned:g}/{r.points:g}",
             "yes" if r.as_expected else "NO", (r.explanation or r.status)[:110]) for r in rows]
    widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True))
             for line in [header, *body]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", default=None, help=f"folder of upstream files (default: ${SOURCES_ENV}, "
                                                        f"else {DEFAULT_SOURCES.relative_to(ROOT)})")
    parser.add_argument("--only", nargs="*", default=None, help="entry ids to grade (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="entries graded at once")
    parser.add_argument("--pin", action="store_true", help="print each piece's sha256 instead of grading")
    args = parser.parse_args(argv)
    sources = sources_dir(args.sources)
    entries = [e for e in load_entries() if args.only is None or e.id in args.only]
    if args.pin:
        for entry in entries:
            for piece in entry.pieces:
                label = piece.get("name") or piece["lines"]
                print(entry.id, label, sha256(piece_text(entry, piece, sources)))
        return 0
    rows = run(entries, sources, args.jobs)
    print(table(rows))
    return 0 if all(r.as_expected for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Every sum a grade shows adds up: results.json, the HTML report (in a real headless
Chromium), the terminal table, the CSV export and the gradebook.

The three references are graded once each through the `grade` command (with the quiz
key as their answers), and one assignment-1 workspace that loses points on part of a
task and of the quiz. In every output each task's points are the manifest's, each
task's tests add up to its points exactly, their earned points to the task's earned
points, and the tasks' earned points to the total: numbers as shown, added as
decimals.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from grader.authoring.validate import reference_answers, reference_workspace
from grader.core.course import Course
from grader.core.manifest import load_manifest
from tests.browser import chromium, render
from tests.conftest import ROOT, assignment_of

# Every case is graded by `grade submit` in a child process, through the real sandbox.
pytestmark = pytest.mark.sandbox

# Always the last axis, whatever `dim` says: right on most tests, wrong on those of other axes.
LAST_AXIS_SOFTMAX = '''

def softmax(x, dim=-1):
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
'''
CASES = ("assignment1", "assignment2", "assignment3", "assignment1-partial")


def _decimal(text: object) -> Decimal:
    return Decimal(str(text))


def _total(values) -> Decimal:
    return sum((_decimal(v) for v in values), Decimal(0))


def _workspace(case: str, folder: Path) -> Path:
    course = Course(ROOT)
    assignment = case.split("-")[0]
    workspace = reference_workspace(assignment_of(course, assignment), folder)
    if case.endswith("-partial"):
        with open(workspace / "attention.py", "a", encoding="utf-8") as fh:
            fh.write(LAST_AXIS_SOFTMAX)
        answers = reference_answers(assignment_of(course, assignment)).splitlines()
        (workspace / "answers.toml").write_text("\n".join(answers[:-3]) + "\n")  # three questions left out
    return workspace


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, dict]:
    """{case: {"manifest", "terminal", "results", "html", "csv", "db"}}, each case graded once."""
    base = tmp_path_factory.mktemp("sums")
    grade = [sys.executable, "-m", "grader.cli", "--course", str(ROOT)]
    runs = {}
    for case in CASES:
        folder = base / case
        workspace = _workspace(case, folder / "work")
        out = {"json": folder / "results.json", "html": folder / "report.html", "db": folder / "gradebook.sqlite"}
        command = [*grade, "submit", case.split("-")[0], "--workspace", str(workspace), "--student", "sums",
                   "--json", str(out["json"]), "--html", str(out["html"]), "--gradebook", str(out["db"])]
        runs[case] = (subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                       env={"COLUMNS": "160", **_env()}), out)
    graded = {}
    for case, (process, out) in runs.items():
        terminal, _ = process.communicate(timeout=900)
        assert process.returncode == 0, terminal[-3000:]
        assignment = case.split("-")[0]
        csv = subprocess.run([*grade, "export", assignment, "--format", "csv", "--gradebook", str(out["db"])],
                             capture_output=True, text=True, timeout=300, check=True).stdout
        graded[case] = {"manifest": load_manifest(ROOT / "assignments" / assignment / "assignment.toml"),
                        "terminal": terminal, "results": json.loads(out["json"].read_text()),
                        "html": out["html"], "csv": csv, "db": out["db"]}
    return graded


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "COLUMNS"}


def _stored(case: dict) -> tuple[dict[str, tuple[Decimal, Decimal]], Decimal, dict]:
    """({task: (earned, points)}, total, the stored result) from the gradebook file itself."""
    with sqlite3.connect(case["db"]) as db:
        (submission, total, result_json), = db.execute("SELECT id, total, result_json FROM submissions")
        tasks = {task: (_decimal(earned), _decimal(points)) for task, earned, points in db.execute(
            "SELECT task_id, earned, points FROM task_scores WHERE submission_id = ?", (submission,))}
    return tasks, _decimal(total), json.loads(result_json)


@pytest.mark.parametrize("case", CASES)
def test_results_json_tests_add_up_to_each_task_and_to_the_score(graded, case):
    data, manifest = graded[case]["results"], graded[case]["manifest"]
    stored, total, _ = _stored(graded[case])
    by_task: dict[str, list[tuple[Decimal, Decimal]]] = {}
    for test in data["tests"]:
        if "status" in test:
            points = (_decimal(test["score"]), _decimal(test["max_score"]))
        else:  # pending (not judged here): no score; what it is worth is kept beside it
            assert "score" not in test and test["extra_data"]["pending"], test
            points = (Decimal(0), _decimal(test["extra_data"]["max_score"]))
        assert all(p == round(p, 2) for p in points), test  # hundredths, nothing smaller
        by_task.setdefault(test["tags"][0], []).append(points)
    assert set(by_task) == {t.id for t in manifest.tasks}, sorted(by_task)
    for task in manifest.tasks:
        tests = by_task[task.id]
        assert _total(share for _, share in tests) == _decimal(task.points), (task.id, tests)
        assert _total(earned for earned, _ in tests) == stored[task.id][0], task.id
    assert _total(t.get("score", 0) for t in data["tests"]) == _decimal(data["score"]) == total


@pytest.mark.parametrize("case", CASES)
def test_gradebook_tasks_add_up_to_the_total_and_keep_the_manifest_points(graded, case):
    manifest = graded[case]["manifest"]
    stored, total, result = _stored(graded[case])
    assert {task: points for task, (_, points) in stored.items()} == {t.id: _decimal(t.points) for t in manifest.tasks}
    assert _total(earned for earned, _ in stored.values()) == total
    tests = result["score"]["tests"]
    for task in manifest.tasks:
        mine = [t for t in tests if t["task"] == task.id]
        assert _total(t["max_score"] for t in mine) == _decimal(task.points), task.id
        assert _total(t["score"] for t in mine) == stored[task.id][0], task.id
    if case.endswith("-partial"):  # the case is worth checking: it lost some, not all, of two tasks
        assert Decimal(0) < stored["softmax"][0] < stored["softmax"][1]
        assert Decimal(0) < stored["quiz"][0] < stored["quiz"][1]


@pytest.mark.parametrize("case", CASES)
def test_terminal_table_adds_up(graded, case):
    manifest, terminal = graded[case]["manifest"], graded[case]["terminal"]
    stored, total, _ = _stored(graded[case])
    shown = []
    for line in terminal.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 3 and (found := re.fullmatch(r"([\d.]+)/([\d.]+)", cells[2])):
            shown.append((_decimal(found[1]), _decimal(found[2])))
    assert shown == [stored[t.id] for t in manifest.tasks], terminal
    found = re.search(r"Total: ([\d.]+) / ([\d.]+)", terminal)
    assert found and _decimal(found[1]) == _total(e for e, _ in shown) == total, terminal
    assert _decimal(found[2]) == _decimal(manifest.max_points)


@pytest.mark.parametrize("case", CASES)
def test_csv_export_adds_up(graded, case):
    manifest = graded[case]["manifest"]
    stored, total, _ = _stored(graded[case])
    header, row = [line.split(",") for line in graded[case]["csv"].strip().splitlines()]
    values = dict(zip(header, row, strict=True))
    assert _decimal(values["total"]) == total and _decimal(values["max"]) == _decimal(manifest.max_points)
    assert {t.id: _decimal(values[t.id]) for t in manifest.tasks} == {t: e for t, (e, _) in stored.items()}
    assert _total(values[t.id] for t in manifest.tasks) == total


@pytest.mark.browser
@pytest.mark.skipif(chromium() is None, reason="no Chromium installed (apt-get install chromium)")
@pytest.mark.parametrize("case", CASES)
def test_html_report_adds_up_in_a_browser(graded, case):
    manifest = graded[case]["manifest"]
    stored, total, _ = _stored(graded[case])
    dom, console = render(graded[case]["html"])
    assert not console, console
    for task in manifest.tasks:
        row = re.search(rf'href="#task-{task.id}".*?class="num">\s*([\d.]+) / ([\d.]+)\s*<', dom, re.S)
        assert row, task.id
        assert (_decimal(row[1]), _decimal(row[2])) == stored[task.id], task.id
    shown = re.search(r'id="total"[^>]*>\s*([\d.]+) / ([\d.]+)', dom)
    assert shown and _decimal(shown[1]) == total and _decimal(shown[2]) == _decimal(manifest.max_points)
    assert _total(stored[t.id][0] for t in manifest.tasks) == total

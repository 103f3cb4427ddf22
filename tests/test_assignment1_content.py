"""Assignment 1's content holds together: the reference passes every hidden test,
the stubs fail every test (cleanly, in the test body), every mutant fails only
tests of its own task and is named by the diagnosis there, and the manifest,
stubs, reference, quiz and key agree with each other.

The suites run in two child processes (`python tests/test_assignment1_content.py
OUT.json PART PARTS`) that share the workspaces between them, call pytest.main
once per workspace (torch is imported once per process, not once per run) and
write what they saw as JSON; the tests below read those files. A mutant's
workspace is built the way `grade validate` builds it: the reference module,
the mutant's source appended, and the student function rebound to it.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = ROOT / "assignments" / "assignment1"
REFERENCE = ROOT / "reference" / "assignment1"
HIDDEN = REFERENCE / "tests"
PUBLIC = ASSIGNMENT / "tests"
SEEDS = (20261214, 7)
TASK_IDS = ("attention_scores", "scale_scores", "softmax", "causal_mask",
            "scaled_dot_product_attention")

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _mutants():
    from grader.harness.diagnose import load_mutants

    return load_mutants("reference.assignment1.mutants")


# ------------------------------------------------------------------ child process


class _Collector:
    """A pytest plugin object: per test, its task, outcome, phase and grade record."""

    def __init__(self):
        self.tasks: dict[str, str | None] = {}
        self.results: dict[str, dict] = {}

    def pytest_collection_modifyitems(self, items):
        for item in items:
            markers = list(item.iter_markers("task"))
            self.tasks[item.nodeid] = markers[0].args[0] if len(markers) == 1 else None

    def pytest_runtest_logreport(self, report):
        entry = self.results.setdefault(report.nodeid, {"outcome": "passed", "when": "call"})
        if report.failed and entry["outcome"] == "passed":
            entry.update(outcome="failed", when=report.when, text=report.longreprtext[-600:])
        for key, value in report.user_properties:
            if key == "grade":
                entry["diagnosis"] = (value.get("diagnosis") or {}).get("id")
                entry["measured"] = value.get("measured", "")


# Plugins a child run does not need: without them one pass of the suite is much faster.
_QUIET = [arg for name in (
    "cacheprovider", "unraisableexception", "threadexception", "logging", "warnings", "doctest",
    "junitxml", "pastebin", "stepwise", "legacypath", "faulthandler", "tmpdir", "monkeypatch",
    "recwarn", "setuponly", "setupplan", "debugging", "hypothesispytest") for arg in ("-p", f"no:{name}")]


def _run_suite(tests: Path, workspace: Path, seed: int) -> dict:
    collector = _Collector()
    args = [str(tests), "-q", "-s", "--tb=line", "--no-header", "--import-mode=importlib",
            "--assert=plain",  # the tests judge through `check`; no assertion rewriting needed
            *_QUIET, f"--grade-seed={seed}", "--grade-workspace", str(workspace)]
    code = pytest.main(args, plugins=[collector])
    for nodeid, task in collector.tasks.items():
        collector.results.setdefault(nodeid, {"outcome": "not run", "when": ""})["task"] = task
    return {"exit_code": int(code), "tests": collector.results}


def _mutant_workspace(folder: Path, m) -> Path:
    source = (REFERENCE / "attention.py").read_text(encoding="utf-8")
    text = f"{source}\n\n# --- mutant {m.id}\n{m.source()}\n{m.function} = {m.fn.__name__}\n"
    (folder / "attention.py").write_text(text, encoding="utf-8")
    return folder


def _child(out: Path, part: int, parts: int) -> None:
    """Run share `part` of `parts` of the suites and write what was seen to `out`."""
    import contextlib
    import io
    import time

    runs: dict = {"mutants": {}}
    with contextlib.redirect_stdout(io.StringIO()):
        if part == 0:
            started = time.perf_counter()
            runs["reference"] = [_run_suite(HIDDEN, REFERENCE, s) for s in SEEDS]
            runs["hidden_seconds"] = (time.perf_counter() - started) / len(SEEDS)
            runs["stubs"] = [_run_suite(HIDDEN, ASSIGNMENT, SEEDS[0])]
            runs["public_stubs"] = [_run_suite(PUBLIC, ASSIGNMENT, SEEDS[0])]
            runs["public_reference"] = [_run_suite(PUBLIC, REFERENCE, SEEDS[0])]
        with tempfile.TemporaryDirectory() as tmp:
            for m in _mutants()[part::parts]:
                folder = Path(tmp) / m.id
                folder.mkdir()
                _mutant_workspace(folder, m)
                runs["mutants"][m.id] = [_run_suite(HIDDEN, folder, SEEDS[0])]
    out.write_text(json.dumps(runs), encoding="utf-8")


# --------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("a1")
    parts = 2  # two child processes share the mutants
    children = [subprocess.Popen([sys.executable, __file__, str(folder / f"{i}.json"), str(i),
                                  str(parts)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True) for i in range(parts)]
    merged: dict = {"mutants": {}}
    for i, child in enumerate(children):
        _, err = child.communicate(timeout=600)
        out = folder / f"{i}.json"
        assert child.returncode == 0 and out.is_file(), err[-3000:]
        part = json.loads(out.read_text(encoding="utf-8"))
        merged["mutants"].update(part.pop("mutants"))
        merged.update(part)
    return merged


def _outcomes(run: dict) -> dict[str, str]:
    return {nodeid: t["outcome"] for nodeid, t in run["tests"].items()}


def test_reference_passes_every_hidden_test(runs):
    for run in runs["reference"]:
        assert run["tests"], "no hidden tests were collected"
        failed = {n: t.get("text", "") for n, t in run["tests"].items() if t["outcome"] != "passed"}
        assert not failed, failed
        assert run["exit_code"] == 0


def test_every_hidden_test_has_exactly_one_known_task(runs):
    tasks = {nodeid: t["task"] for nodeid, t in runs["reference"][0]["tests"].items()}
    assert all(task in TASK_IDS for task in tasks.values()), tasks
    assert set(tasks.values()) == set(TASK_IDS)


def test_hidden_test_names_are_unique_across_files(runs):
    # The grading suite (grader/suite.py) names an outcome by the test function alone,
    # so two files with a test of the same name would shadow each other's failures.
    names = [nodeid.split("::", 1)[-1] for nodeid in runs["reference"][0]["tests"]]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_hidden_suite_is_fast(runs):
    assert runs["hidden_seconds"] < 10


def test_stubs_fail_every_hidden_test_in_the_test_body(runs):
    for name in ("stubs", "public_stubs"):
        run = runs[name][0]
        assert run["tests"]
        for nodeid, t in run["tests"].items():
            assert t["outcome"] == "failed" and t["when"] == "call", (name, nodeid, t)
            assert "not implemented yet" in t["text"], (name, nodeid, t["text"])


def test_public_tests_pass_on_the_reference(runs):
    run = runs["public_reference"][0]
    assert run["tests"] and set(_outcomes(run).values()) == {"passed"}, run


def test_public_tests_cover_every_task(runs):
    tasks = {t["task"] for t in runs["public_stubs"][0]["tests"].values()}
    assert tasks == set(TASK_IDS)


@pytest.mark.parametrize("mutant_id", [m.id for m in _mutants()])
def test_mutant_is_caught_only_by_its_task_and_named(runs, mutant_id):
    task = next(m.function for m in _mutants() if m.id == mutant_id)  # function == task id here
    for run in runs["mutants"][mutant_id]:
        failing = {n: t for n, t in run["tests"].items() if t["outcome"] != "passed"}
        assert failing, f"{mutant_id} passes every hidden test"
        elsewhere = {n for n, t in failing.items() if t["task"] != task}
        assert not elsewhere, f"{mutant_id} fails tests of other tasks: {sorted(elsewhere)}"
        assert all(t["when"] == "call" for t in failing.values()), failing
        # Another mutant may be named where the two agree (e.g. on a 1 x 1 mask); what
        # matters is that some failing test names this one.
        named = [n for n, t in failing.items() if t.get("diagnosis") == mutant_id]
        assert named, f"no failing test names {mutant_id}: {failing}"


# ------------------------------------------------------------- static agreement


def test_manifest_tasks_and_functions():
    from grader.core.manifest import load_manifest

    manifest = load_manifest(ASSIGNMENT / "assignment.toml")
    assert manifest.id == "assignment1" and manifest.files == ("attention.py",)
    assert [t.id for t in manifest.tasks] == [*TASK_IDS, "quiz"]
    assert manifest.max_points == 100
    for task in manifest.tasks:
        if task.kind == "code":
            assert task.functions == (task.id,)
            assert {"sdpa", "multihead_attention"} <= set(task.forbidden)
    assert "softmax" in manifest.task("softmax").forbidden
    assert "softmax" in manifest.task("scaled_dot_product_attention").forbidden


def test_stubs_and_reference_share_signatures():
    import importlib.util

    from reference.assignment1 import attention as reference

    spec = importlib.util.spec_from_file_location("_a1_stubs", ASSIGNMENT / "attention.py")
    stubs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stubs)
    for name in TASK_IDS:
        stub, ref = getattr(stubs, name), getattr(reference, name)
        assert inspect.signature(stub) == inspect.signature(ref), name
        assert stub.__doc__ and "§" in stub.__doc__, name
        with pytest.raises(NotImplementedError, match=name):
            stub(*[None] * len([p for p in inspect.signature(stub).parameters.values()
                                if p.default is inspect.Parameter.empty]))


def test_every_mutant_is_registered_once_for_a_task_function():
    mutants = _mutants()
    ids = [m.id for m in mutants]
    assert len(ids) == len(set(ids))
    assert {m.function for m in mutants} == set(TASK_IDS)
    for m in mutants:
        assert m.section.startswith("§") and m.explanation and m.title


def test_quiz_questions_key_and_answer_template_agree():
    questions = tomllib.loads((ASSIGNMENT / "quiz.toml").read_text(encoding="utf-8"))["questions"]
    key = tomllib.loads((REFERENCE / "quiz_key.toml").read_text(encoding="utf-8"))
    template = tomllib.loads((ASSIGNMENT / "answers.toml").read_text(encoding="utf-8"))
    ids = [q["id"] for q in questions]
    assert 6 <= len(ids) <= 8 and len(ids) == len(set(ids))
    assert set(key["answers"]) == set(ids) == set(key["explanations"])
    assert set(template) == set(ids) and all(v == "" for v in template.values())
    for q in questions:
        answer = key["answers"][q["id"]]
        assert q["section"].startswith("§")
        if q["kind"] == "choice":
            assert isinstance(answer, int) and 0 <= answer < len(q["choices"]), q["id"]
        else:
            assert q["kind"] == "numeric" and answer["tolerance"] > 0, q["id"]


def test_quiz_key_scores_full_marks():
    from grader.core.quiz import grade_quiz, load_key, load_questions

    questions = load_questions(ASSIGNMENT / "quiz.toml")
    key = load_key(REFERENCE / "quiz_key.toml")
    right = "\n".join(f"{q} = {a['value'] if isinstance(a, dict) else a}" for q, a in key.items())
    assert all(o.status == "passed" for o in grade_quiz(questions, key, right))
    blank = (ASSIGNMENT / "answers.toml").read_text(encoding="utf-8")
    assert not any(o.status == "passed" for o in grade_quiz(questions, key, blank))


if __name__ == "__main__":
    _child(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))

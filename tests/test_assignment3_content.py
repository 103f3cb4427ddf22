"""Assignment 3's content holds together.

* the reference passes every hidden test (Triton through its interpreter, as the
  sandbox does without a GPU), the stubs fail every test that is not pending,
  and the public tests do the same;
* a slow but correct kernel (16 × 16 tiles) passes every flash_forward
  correctness test; kernels that call SDPA or build q kᵀ with torch fail all of them;
* every mutant, run as a submission (the reference with the mutant appended to
  the module that defines its function), fails tests of its own task only and
  is named by the diagnosis there. flash_attention also serves the bonus tasks
  flash_gqa and flash_backward (their `functions` are empty or a given helper),
  so a wrong forward may fail those too;
* manifest, stubs, reference, mutants, quiz and static checks agree.

The suites run in two child processes (`python tests/test_assignment3_content.py
GROUP OUT.json`, side by side on two cores), each calling pytest.main once per
workspace with TRITON_INTERPRET=1 and one torch thread, and writing what it saw
as JSON; the tests below read those files.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `reference` is a top-level package of the course root
    sys.path.insert(0, str(ROOT))

ASSIGNMENT = ROOT / "assignments" / "assignment3"
REFERENCE = ROOT / "reference" / "assignment3"
HIDDEN = REFERENCE / "tests"
PUBLIC = ASSIGNMENT / "tests"
FIXTURES = ROOT / "tests" / "fixtures"
FILES = ("efficient.py", "flash.py")
FLASH_TESTS = ("test_flash_forward.py", "test_flash_gqa.py", "test_flash_backward.py", "test_flash_speed.py")
EFFICIENT_TESTS = ("test_gqa.py", "test_kv_cache.py", "test_sliding_window.py", "test_streaming.py")
CODE_TASKS = ("gqa", "kv_cache", "sliding_window", "streaming", "flash_forward")
# Tasks whose tests call a function owned by another task: a wrong version of that function
# may fail them as well (a broken forward cannot give right gradients).
DEPENDENT_TASKS = {"flash_attention": {"flash_gqa", "flash_backward", "flash_speed"}}
CHILD_TIMEOUT_S = 900


def _mutants():
    from grader.harness.diagnose import load_mutants

    return load_mutants("reference.assignment3.mutants")


def _manifest():
    from grader.core.manifest import load_manifest

    return load_manifest(ASSIGNMENT / "assignment.toml")


def _module_of(function: str) -> str:
    """The reference file that defines `function`."""
    for filename in FILES:
        if f"\ndef {function}(" in (REFERENCE / filename).read_text(encoding="utf-8"):
            return filename
    raise LookupError(function)


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

    def pytest_deselected(self, items):
        for item in items:
            self.tasks.pop(item.nodeid, None)

    def pytest_runtest_logreport(self, report):
        entry = self.results.setdefault(report.nodeid, {"outcome": "passed", "when": "call"})
        if report.skipped and entry["outcome"] == "passed":
            entry.update(outcome="skipped", when=report.when, text=str(report.longrepr)[-300:])
        if report.failed and entry["outcome"] in ("passed", "skipped"):
            entry.update(outcome="failed", when=report.when, text=report.longreprtext[-800:])
        for key, value in report.user_properties:
            if key == "grade":
                entry["diagnosis"] = (value.get("diagnosis") or {}).get("id")


def _run_suite(paths: list[Path], workspace: Path, seed: int, select: str | None = None) -> dict:
    collector = _Collector()
    args = [*map(str, paths), "-q", "-p", "no:cacheprovider", "--import-mode=importlib", "--no-header",
            f"--grade-seed={seed}", "--grade-workspace", str(workspace)]
    if select:
        args += ["-k", select]
    started = time.perf_counter()
    code = pytest.main(args, plugins=[collector])
    for nodeid, task in collector.tasks.items():
        entry = collector.results.setdefault(nodeid, {"outcome": "not run", "when": ""})
        entry["task"] = task
    return {"exit_code": int(code), "seed": seed, "seconds": time.perf_counter() - started,
            "tests": {n: t for n, t in collector.results.items() if n in collector.tasks}}


def _mutant_workspace(folder: Path, m) -> Path:
    for filename in FILES:
        source = (REFERENCE / filename).read_text(encoding="utf-8")
        if filename == _module_of(m.function):
            source += f"\n\n# --- mutant {m.id}\n{m.source()}\n{m.function} = {m.fn.__name__}\n"
        (folder / filename).write_text(source, encoding="utf-8")
    return folder


def _child(group: str, out: Path) -> None:
    import contextlib
    import io

    rng = random.SystemRandom()
    seed = lambda: rng.randrange(1, 2**31)  # fresh inputs on every run, like grading
    hidden = sorted(HIDDEN.glob("test_*.py"))
    forward = [HIDDEN / "test_flash_forward.py"]
    runs: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        if group == "main":
            runs["reference"] = _run_suite(hidden, REFERENCE, seed())
            runs["stubs"] = _run_suite(hidden, ASSIGNMENT, seed())
            runs["public_stubs"] = _run_suite([PUBLIC], ASSIGNMENT, seed())
            runs["public_reference"] = _run_suite([PUBLIC], REFERENCE, seed())
            for name in ("assignment3_cheat_sdpa", "assignment3_cheat_nxn"):
                runs[name] = _run_suite(forward, FIXTURES / name, seed())
        else:
            runs["assignment3_slow"] = _run_suite(forward, FIXTURES / "assignment3_slow", seed(),
                                                  select="not memory")
        # A mutant changes one module; the tests of the other module's tasks never call it.
        # flash mutants (torch emulations, quick) run beside the reference, the others here.
        runs["mutants"] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for m in _mutants():
                in_flash = _module_of(m.function) == "flash.py"
                if in_flash != (group == "main"):
                    continue
                folder = Path(tmp) / m.id
                folder.mkdir()
                names = FLASH_TESTS if in_flash else EFFICIENT_TESTS
                runs["mutants"][m.id] = _run_suite([HIDDEN / n for n in names], _mutant_workspace(folder, m), seed())
    out.write_text(json.dumps(runs, indent=1), encoding="utf-8")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("a3")
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    children = {}
    for group in ("main", "checks"):
        with open(folder / f"{group}.log", "w") as log:
            children[group] = subprocess.Popen([sys.executable, __file__, group, str(folder / f"{group}.json")],
                                               cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    merged: dict = {}
    for group, child in children.items():
        child.wait(timeout=CHILD_TIMEOUT_S)
        out = folder / f"{group}.json"
        log = (folder / f"{group}.log").read_text(encoding="utf-8", errors="replace")
        assert child.returncode == 0 and out.is_file(), log[-3000:]
        data = json.loads(out.read_text(encoding="utf-8"))
        merged.setdefault("mutants", {}).update(data.pop("mutants"))
        merged.update(data)
    return merged


def _failing(run: dict) -> dict[str, dict]:
    return {n: t for n, t in run["tests"].items() if t["outcome"] != "passed" and t["outcome"] != "skipped"}


# ----------------------------------------------------------------- suites (slow)


@pytest.mark.slow
def test_reference_passes_every_hidden_test(runs):
    run = runs["reference"]
    assert len(run["tests"]) > 50, "hidden tests were not collected"
    failed = {n: t.get("text", "") for n, t in _failing(run).items()}
    assert not failed, (run["seed"], failed)
    skipped = {n for n, t in run["tests"].items() if t["outcome"] == "skipped"}
    assert {run["tests"][n]["task"] for n in skipped} <= {"flash_speed"}, skipped  # pending: no CUDA here
    assert all("not timed: no CUDA device" in run["tests"][n]["text"] for n in skipped)


@pytest.mark.slow
def test_hidden_suite_runs_in_under_a_minute(runs):
    # Measured wall time in a child that shares the machine with another child; generous bound.
    assert runs["reference"]["seconds"] < 120, runs["reference"]["seconds"]


@pytest.mark.slow
def test_every_hidden_test_has_exactly_one_known_task(runs):
    tasks = {t["task"] for t in runs["reference"]["tests"].values()}
    manifest = _manifest()
    assert tasks == {t.id for t in manifest.tasks if t.kind != "quiz"}, tasks


@pytest.mark.slow
def test_stubs_fail_every_test_that_is_judged(runs):
    for name in ("stubs", "public_stubs"):
        run = runs[name]
        assert run["tests"]
        for nodeid, t in run["tests"].items():
            if t["task"] == "flash_speed":
                assert t["outcome"] == "skipped", (name, nodeid, t)
                continue
            assert t["outcome"] == "failed" and t["when"] == "call", (name, nodeid, t)
            assert "not implemented yet" in t["text"], (name, nodeid, t["text"])


@pytest.mark.slow
def test_public_tests_pass_on_the_reference_and_cover_every_task(runs):
    run = runs["public_reference"]
    assert run["tests"] and not _failing(run), _failing(run)
    tasks = {t["task"] for t in run["tests"].values()}
    assert tasks == {*CODE_TASKS, "flash_gqa", "flash_backward"}, tasks


@pytest.mark.slow
def test_slow_but_correct_kernel_passes_the_correctness_tests(runs):
    run = runs["assignment3_slow"]
    assert len(run["tests"]) >= 20
    assert not _failing(run), (run["seed"], _failing(run))


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["assignment3_cheat_sdpa", "assignment3_cheat_nxn"])
def test_cheating_kernels_fail_every_flash_forward_test(runs, fixture):
    run = runs[fixture]
    assert run["tests"]
    for nodeid, t in run["tests"].items():
        assert t["outcome"] == "failed", (nodeid, t)
        assert "forbidden API" in t["text"], (nodeid, t["text"])


@pytest.mark.slow
@pytest.mark.parametrize("mutant_id", [m.id for m in _mutants()])
def test_mutant_fails_only_its_own_task_and_is_named(runs, mutant_id):
    manifest = _manifest()
    m = next(m for m in _mutants() if m.id == mutant_id)
    own = manifest.task_for_function(m.function).id
    allowed = {own} | DEPENDENT_TASKS.get(m.function, set())
    same_function = {other.id for other in _mutants() if other.function == m.function} - {m.id}
    run = runs["mutants"][mutant_id]
    failing = _failing(run)
    assert failing, f"{mutant_id} passes every hidden test (seed {run['seed']})"
    elsewhere = {n for n, t in failing.items() if t["task"] not in allowed}
    assert not elsewhere, f"{mutant_id} fails tests of other tasks (seed {run['seed']}): {sorted(elsewhere)}"
    assert all(t["when"] == "call" for t in failing.values()), failing
    named = [n for n, t in failing.items() if t["task"] == own and t.get("diagnosis") == mutant_id]
    assert named, f"no failing {own} test names {mutant_id} (seed {run['seed']}): {failing}"
    confused = {t.get("diagnosis") for t in failing.values()} & same_function
    assert not confused, f"{mutant_id} was diagnosed as {confused} (seed {run['seed']})"


# ------------------------------------------------------------- static agreement


def test_manifest_tasks_points_and_links():
    manifest = _manifest()
    assert manifest.id == "assignment3" and manifest.files == FILES
    assert manifest.sections == "§22–§29"
    assert manifest.max_points == 100 and manifest.bonus_points == 15
    assert manifest.limits.call_timeout_s == 120 and manifest.limits.submission_budget_s == 600
    flash = manifest.task("flash_forward")
    assert flash.functions == ("flash_attention",)
    assert set(flash.forbidden) == {"softmax", "sdpa", "matmul", "multihead_attention", "numpy"}
    assert flash.requires == ("triton_launch",)
    assert "sdpa" in manifest.task("sliding_window").forbidden
    assert manifest.task("flash_speed").kind == "timing" and manifest.task("flash_speed").speed
    assert {t.id for t in manifest.tasks if t.bonus} == {"flash_gqa", "flash_backward"}
    for task in manifest.tasks:
        for function in task.functions:
            assert _module_of(function) in FILES


def _load_stub(filename: str):
    spec = importlib.util.spec_from_file_location(f"_a3_stub_{Path(filename).stem}", ASSIGNMENT / filename)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stubs_and_reference_share_signatures_and_raise_their_task():
    from reference.assignment3 import efficient, flash

    manifest = _manifest()
    references = {"efficient.py": efficient, "flash.py": flash}
    for task in manifest.tasks:
        for function in task.functions:
            filename = _module_of(function)
            stub = getattr(_load_stub(filename), function)
            ref = getattr(references[filename], function)
            assert inspect.signature(stub) == inspect.signature(ref), function
            assert stub.__doc__ and "§" in stub.__doc__, function
            if function == "flash_attention_grads":  # given code: it calls flash_attention
                continue
            required = [p for p in inspect.signature(stub).parameters.values() if p.default is inspect.Parameter.empty]
            with pytest.raises(NotImplementedError, match=task.id):
                stub(*[None] * len(required))


def test_stub_kernel_signature_spells_out_pointers_and_strides():
    stub = _load_stub("flash.py")
    params = list(inspect.signature(stub._flash_fwd_kernel.fn).parameters)
    assert params[:4] == ["Q", "K", "V", "Out"]
    for t in ("q", "k", "v", "o"):
        row = "m" if t in "qo" else "n"
        assert [f"stride_{t}b", f"stride_{t}h", f"stride_{t}{row}", f"stride_{t}d"] == [
            p for p in params if p.startswith(f"stride_{t}")]
    assert {"N_Q", "N_KV", "sm_scale", "BLOCK_M", "BLOCK_N", "HEAD_DIM", "IS_CAUSAL"} <= set(params)
    source = (ASSIGNMENT / "flash.py").read_text(encoding="utf-8")
    assert "make_block_ptr" not in source and 'NotImplementedError("flash_forward")' in source
    assert stub.BLOCK_N == __import__("reference.assignment3.flash", fromlist=["BLOCK_N"]).BLOCK_N


def test_every_mutant_is_registered_once_for_a_task_function():
    manifest = _manifest()
    mutants = _mutants()
    ids = [m.id for m in mutants]
    assert len(ids) == len(set(ids)) and len(ids) >= 15
    assert {manifest.task_for_function(m.function).id for m in mutants} == {"gqa", "kv_cache", "sliding_window",
                                                                            "streaming", "flash_forward"}
    for m in mutants:
        assert m.section.startswith("§") and m.explanation and m.title
        ref = getattr(__import__(f"reference.assignment3.{Path(_module_of(m.function)).stem}",
                                 fromlist=[m.function]), m.function)
        assert list(inspect.signature(m.fn).parameters) == list(inspect.signature(ref).parameters), m.id


def test_static_checks_pass_the_reference_and_mutants_and_catch_the_cheats():
    from grader.intake.static_checks import check_sources

    manifest = _manifest()
    reference = {f: (REFERENCE / f).read_text(encoding="utf-8") for f in FILES}
    findings, problems = check_sources(manifest, reference)
    assert not findings and not problems, findings
    for m in _mutants():
        filename = _module_of(m.function)
        sources = dict(reference)
        sources[filename] += f"\n\n{m.source()}\n{m.function} = {m.fn.__name__}\n"
        findings, problems = check_sources(manifest, sources)
        assert not findings and not problems, (m.id, findings)
    for fixture, group in (("assignment3_cheat_sdpa", "sdpa"), ("assignment3_cheat_nxn", "matmul")):
        sources = {f: (FIXTURES / fixture / f).read_text(encoding="utf-8") for f in FILES
                   if (FIXTURES / fixture / f).is_file()}
        findings, _ = check_sources(manifest, sources)
        assert any(f.task == "flash_forward" and f.group == group for f in findings), (fixture, findings)


def test_quiz_questions_key_and_answer_template_agree():
    from grader.core.quiz import grade_quiz, load_key, load_questions

    questions = tomllib.loads((ASSIGNMENT / "quiz.toml").read_text(encoding="utf-8"))["questions"]
    key = tomllib.loads((REFERENCE / "quiz_key.toml").read_text(encoding="utf-8"))
    template = tomllib.loads((ASSIGNMENT / "answers.toml").read_text(encoding="utf-8"))
    ids = [q["id"] for q in questions]
    assert len(ids) == len(set(ids))
    assert set(key["answers"]) == set(ids) == set(key["explanations"]) == set(template)
    assert all(v == "" for v in template.values())
    for q in questions:
        answer = key["answers"][q["id"]]
        assert q["section"].startswith("§")
        if q["kind"] == "choice":
            assert isinstance(answer, int) and 0 <= answer < len(q["choices"]), q["id"]
        else:
            assert q["kind"] == "numeric" and answer["tolerance"] > 0, q["id"]
    loaded, answers = load_questions(ASSIGNMENT / "quiz.toml"), load_key(REFERENCE / "quiz_key.toml")
    right = "\n".join(f"{q} = {a['value'] if isinstance(a, dict) else a}" for q, a in answers.items())
    assert all(o.status == "passed" for o in grade_quiz(loaded, answers, right))
    blank = (ASSIGNMENT / "answers.toml").read_text(encoding="utf-8")
    assert not any(o.status == "passed" for o in grade_quiz(loaded, answers, blank))
    lecture = "cost_4k_to_1m = 60000\nwindow_reach_mistral = 131040\ncost_4k_to_32k = 64\n"
    assert sum(o.status == "passed" for o in grade_quiz(loaded, answers, lecture)) == 3


def test_quiz_numbers_follow_from_the_reference():
    from reference.assignment3.efficient import kv_cache_bytes

    answers = tomllib.loads((REFERENCE / "quiz_key.toml").read_text(encoding="utf-8"))["answers"]
    assert answers["cost_4k_to_32k"]["value"] == (32_000 / 4_000) ** 2
    assert answers["cost_4k_to_1m"]["value"] == (1_000_000 / 4_000) ** 2
    gqa, mha = kv_cache_bytes(80, 8, 128, 4096), kv_cache_bytes(80, 64, 128, 4096)
    assert answers["gqa_cache_gib"]["value"] == gqa / 2**30 and answers["gqa_cache_factor"]["value"] == mha / gqa


if __name__ == "__main__":
    _child(sys.argv[1], Path(sys.argv[2]))

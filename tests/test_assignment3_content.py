"""Assignment 3's content holds together.

* the reference passes every hidden test (Triton through its interpreter, as the
  sandbox does without a GPU), the stubs fail every test that is not pending,
  and the public tests do the same;
* a slow but correct kernel (16 × 16 tiles, written by scripts/make_slow_kernel.py)
  passes every flash_forward correctness test; submissions that call SDPA or build
  q kᵀ with torch beside a trivial kernel fail every flash_forward test (they have
  no kernel of the contract) and every flash_launcher test;
* every mutant, run as a submission (the reference with the mutant appended to
  the module that defines its function, or its patch applied to the reference's
  kernel), fails tests of its own task only and is named by the diagnosis there.
  launch_forward also serves flash_gqa and flash_speed, so a wrong forward kernel
  may fail those too;
* manifest, stubs, reference, mutants, quiz and static checks agree.

The suites run in two child processes (`python tests/test_assignment3_content.py
GROUP OUT.json`, side by side on two cores, see tests/content_harness.py), each
calling pytest.main once per workspace with TRITON_INTERPRET=1 and one torch
thread; the tests below read what they saw.
"""

from __future__ import annotations

import ast
import inspect
import random
import sys
import tempfile
from pathlib import Path

import pytest

from grader.core.compat import tomllib

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `reference` is a top-level package of the course root
    sys.path.insert(0, str(ROOT))

from tests import content_harness as harness  # noqa: E402

ASSIGNMENT = ROOT / "assignments" / "assignment3"
REFERENCE = ROOT / "reference" / "assignment3"
HIDDEN = REFERENCE / "tests"
PUBLIC = ASSIGNMENT / "tests"
FIXTURES = ROOT / "tests" / "fixtures"
FILES = ("efficient.py", "flash.py")
FLASH_TESTS = ("test_flash_forward.py", "test_flash_launcher.py", "test_flash_gqa.py", "test_flash_backward.py",
               "test_flash_speed.py")
EFFICIENT_TESTS = ("test_gqa.py", "test_kv_cache.py", "test_sliding_window.py", "test_streaming.py")
CODE_TASKS = ("gqa", "kv_cache", "sliding_window", "streaming", "flash_forward", "flash_launcher")
PENDING = ("flash_speed",)  # timing tests: pending without CUDA
NO_CUDA = "not timed: no CUDA device"
# Tasks whose tests call a function owned by another task: a wrong version of that function
# may fail them as well (a broken forward cannot give right gradients).
DEPENDENT_TASKS = {"launch_forward": {"flash_gqa", "flash_speed"}}
CHILD_TIMEOUT_S = 900


def _mutants():
    from grader.harness.catalogue import load_mutants

    return load_mutants("reference.assignment3.mutants")


def _manifest():
    from grader.core.manifest import load_manifest

    return load_manifest(ASSIGNMENT / "assignment.toml")


def _module_of(function: str) -> str:
    """The reference file that defines `function` (a launcher's kernels are in flash.py)."""
    if function.startswith("launch_"):
        return "flash.py"
    for filename in FILES:
        if f"\ndef {function}(" in (REFERENCE / filename).read_text(encoding="utf-8"):
            return filename
    raise LookupError(function)


def _slow_kernel_script():
    return harness.load_file(ROOT / "scripts" / "make_slow_kernel.py", "make_slow_kernel")


# ------------------------------------------------------------------ child process


def _child(group: str) -> dict:
    rng = random.SystemRandom()
    seed = lambda: rng.randrange(1, 2**31)  # fresh inputs on every run, like grading
    hidden = sorted(HIDDEN.glob("test_*.py"))
    forward = [HIDDEN / "test_flash_forward.py"]
    cheat_tests = [HIDDEN / "test_flash_forward.py", HIDDEN / "test_flash_launcher.py"]
    runs: dict = {}
    if group == "main":
        runs["reference"] = harness.run_suite(hidden, REFERENCE, seed())
        runs["stubs"] = harness.run_suite(hidden, ASSIGNMENT, seed())
        runs["public_stubs"] = harness.run_suite([PUBLIC], ASSIGNMENT, seed())
        runs["public_reference"] = harness.run_suite([PUBLIC], REFERENCE, seed())
        for name in ("assignment3_cheat_sdpa", "assignment3_cheat_nxn"):
            runs[name] = harness.run_suite(cheat_tests, FIXTURES / name, seed())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            slow = _slow_kernel_script().write_slow_kernel(Path(tmp) / "slow")
            runs["slow_kernel"] = harness.run_suite(forward, slow, seed())
    # A mutant changes one module; the tests of the other module's tasks never call it.
    # flash mutants run beside the reference, the others here.
    mutants = [m for m in _mutants() if (_module_of(m.function) == "flash.py") == (group == "main")]
    tests = lambda m: [HIDDEN / n for n in (FLASH_TESTS if _module_of(m.function) == "flash.py" else EFFICIENT_TESTS)]
    runs["mutants"] = harness.run_mutants("assignment3", mutants, tests, seed)
    return runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    env = {"TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return harness.run_children(Path(__file__), ["main", "checks"], tmp_path_factory.mktemp("a3"), env=env,
                                timeout_s=CHILD_TIMEOUT_S)


# ----------------------------------------------------------------- suites (slow)


@pytest.mark.slow
def test_reference_passes_every_hidden_test(runs):
    run = runs["reference"]
    assert len(run["tests"]) > 50, "hidden tests were not collected"
    problems = harness.reference_problems(run, PENDING, NO_CUDA)
    assert not problems, problems


@pytest.mark.slow
def test_every_hidden_test_has_exactly_one_known_task(runs):
    tasks = {t["task"] for t in runs["reference"]["tests"].values()}
    manifest = _manifest()
    assert tasks == {t.id for t in manifest.tasks if t.kind != "quiz"}, tasks


@pytest.mark.slow
@pytest.mark.parametrize("name", ["stubs", "public_stubs"])
def test_stubs_fail_every_test_that_is_judged(runs, name):
    problems = harness.stub_problems(runs[name], PENDING)
    assert not problems, problems


@pytest.mark.slow
def test_public_tests_pass_on_the_reference_and_cover_every_task(runs):
    run = runs["public_reference"]
    problems = harness.reference_problems(run)
    assert not problems, problems
    tasks = {t["task"] for t in run["tests"].values()}
    assert tasks == {*CODE_TASKS, "flash_gqa", "flash_backward"}, tasks


@pytest.mark.slow
def test_slow_but_correct_kernel_passes_the_correctness_tests(runs):
    run = runs["slow_kernel"]
    assert len(run["tests"]) >= 20
    assert not harness.failing(run), (run["seed"], harness.failing(run))


TILES = ("BLOCK_M", "BLOCK_N", "BWD_BLOCK_M", "BWD_BLOCK_N")


def test_slow_kernel_is_the_reference_with_small_tiles(tmp_path):
    slow = _slow_kernel_script().write_slow_kernel(tmp_path)
    assert sorted(p.name for p in slow.iterdir()) == sorted(FILES)
    assert (slow / "efficient.py").read_bytes() == (REFERENCE / "efficient.py").read_bytes()

    def constants(source: str) -> tuple[dict, str, list]:
        tree = ast.parse(source)
        values = {n.targets[0].id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                  and isinstance(n.targets[0], ast.Name) and n.targets[0].id in TILES}
        rest = [ast.dump(n) for n in tree.body[1:] if not (isinstance(n, ast.Assign) and
                                                          getattr(n.targets[0], "id", "") in values)]
        return values, ast.get_docstring(tree), rest

    ours, doc, rest = constants((slow / "flash.py").read_text(encoding="utf-8"))
    theirs, ref_doc, ref_rest = constants((REFERENCE / "flash.py").read_text(encoding="utf-8"))
    assert ours == dict.fromkeys(TILES, 16)
    assert set(theirs) == set(ours) and all(v > 16 for v in theirs.values()), theirs
    assert rest == ref_rest  # the same code, kernels and launcher included
    assert doc != ref_doc and "16 × 16 tiles" in doc


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["assignment3_cheat_sdpa", "assignment3_cheat_nxn"])
def test_cheating_kernels_fail_every_flash_forward_test(runs, fixture):
    run = runs[fixture]
    assert run["tests"]
    for nodeid, t in run["tests"].items():
        assert t["outcome"] == "failed", (nodeid, t)
        expected = ("no @triton.jit kernel named _flash_fwd_kernel" if "test_flash_forward" in nodeid
                    else "forbidden API")
        assert expected in t["text"], (nodeid, t["text"])


@pytest.mark.slow
@pytest.mark.parametrize("mutant_id", [m.id for m in _mutants()])
def test_mutant_fails_only_its_own_task_and_is_named(runs, mutant_id):
    manifest = _manifest()
    m = next(m for m in _mutants() if m.id == mutant_id)
    own = manifest.task_for_function(m.function).id
    same_function = {other.id for other in _mutants() if other.function == m.function} - {m.id}
    problems = harness.mutant_problems(runs["mutants"][mutant_id], mutant_id, own,
                                       also=DEPENDENT_TASKS.get(m.function, ()), pending_tasks=PENDING,
                                       not_named_as=same_function)
    assert not problems, problems


# ------------------------------------------------------------- static agreement


def test_manifest_tasks_points_and_links():
    manifest = _manifest()
    assert manifest.id == "assignment3" and manifest.files == FILES
    assert manifest.sections == "§22–§29"
    assert manifest.max_points == 100 and manifest.bonus_points == 15
    assert manifest.limits.call_timeout_s == 120 and manifest.limits.submission_budget_s == 600
    flash, launcher = manifest.task("flash_forward"), manifest.task("flash_launcher")
    assert flash.functions == ("launch_forward",) and flash.points == 30 and not flash.forbidden
    assert manifest.contract.kernels_of("launch_forward") == ("_flash_fwd_kernel",)
    assert manifest.contract.kernels_of("launch_backward") == ("_flash_bwd_dkdv_kernel", "_flash_bwd_dq_kernel")
    assert launcher.functions == ("flash_attention",) and launcher.points == 5
    assert set(launcher.forbidden) == {"softmax", "sdpa", "matmul", "multihead_attention", "numpy"}
    assert launcher.requires == ("triton_launch",)
    assert "sdpa" in manifest.task("sliding_window").forbidden
    assert manifest.task("flash_speed").kind == "timing" and manifest.task("flash_speed").speed
    assert {t.id for t in manifest.tasks if t.bonus} == {"flash_gqa", "flash_backward"}
    for task in manifest.tasks:
        for function in task.functions:
            assert _module_of(function) in FILES


def _load_stub(filename: str):
    return harness.load_file(ASSIGNMENT / filename, f"_a3_stub_{Path(filename).stem}")


def test_stub_kernel_signature_spells_out_pointers_and_strides():
    stub = _load_stub("flash.py")
    from reference.assignment3 import flash

    params = list(inspect.signature(stub._flash_fwd_kernel.fn).parameters)
    assert params == list(inspect.signature(flash._flash_fwd_kernel.fn).parameters)  # the contract's signature
    assert params[:5] == ["Q", "K", "V", "Out", "LSE"]
    for t in ("q", "k", "v", "o"):
        row = "m" if t in "qo" else "n"
        assert [f"stride_{t}b", f"stride_{t}h", f"stride_{t}{row}", f"stride_{t}d"] == [
            p for p in params if p.startswith(f"stride_{t}")]
    assert {"N_Q", "N_KV", "sm_scale", "BLOCK_M", "BLOCK_N", "HEAD_DIM", "IS_CAUSAL"} <= set(params)
    source = (ASSIGNMENT / "flash.py").read_text(encoding="utf-8")
    assert "make_block_ptr" not in source and 'NotImplementedError("flash_launcher")' in source
    assert stub.BLOCK_N == __import__("reference.assignment3.flash", fromlist=["BLOCK_N"]).BLOCK_N


@pytest.mark.slow
def test_static_checks_pass_the_reference_and_mutants_and_catch_the_cheats(tmp_path):
    from grader.intake.static_checks import check_sources

    manifest = _manifest()
    reference = {f: (REFERENCE / f).read_text(encoding="utf-8") for f in FILES}
    findings, problems = check_sources(manifest, reference)
    assert not findings and not problems, findings
    for m in _mutants():
        workspace = harness.mutant_workspace(tmp_path / m.id, "assignment3", m)
        sources = {f: (workspace / f).read_text(encoding="utf-8") for f in FILES}
        assert sum(sources[f] != reference[f] for f in FILES) == 1, m.id  # one module changed
        findings, problems = check_sources(manifest, sources)
        assert not findings and not problems, (m.id, findings)
    for fixture, group in (("assignment3_cheat_sdpa", "sdpa"), ("assignment3_cheat_nxn", "matmul")):
        sources = {f: (FIXTURES / fixture / f).read_text(encoding="utf-8") for f in FILES
                   if (FIXTURES / fixture / f).is_file()}
        findings, _ = check_sources(manifest, sources)
        assert any(f.task == "flash_launcher" and f.group == group for f in findings), (fixture, findings)


def test_the_lectures_own_numbers_answer_the_quiz():
    from grader.core.quiz import grade_quiz, load_key, load_questions

    loaded, answers = load_questions(ASSIGNMENT / "quiz.toml"), load_key(REFERENCE / "quiz_key.toml")
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
    harness.child_main(_child)

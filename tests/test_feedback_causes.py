"""Grades that are right for real code, and feedback that names one cause once.

Each submission below is graded for real (the sandbox, the hidden suite, the catalogue); the
Triton kernels run through the interpreter, as the grader runs them without a GPU:

* a kernel that crashes only at N = 1 loses those tests and earns the shapes where it is right; one
  that crashes on many shapes keeps every test it passes, whatever order the tests run in (a crash
  marks its inputs' signature; only that signature is not run again);
* a block-pointer kernel (tl.make_block_ptr, Triton 3.9 removed it) is told what to write instead;
* a tail-key bug with 16-wide tiles is diagnosed at 16, not only at the reference's 64;
* the BLOOM / fairseq ALiBi (+m·j) is explained as a per-row shift that softmax ignores, and earns
  nothing on the bias tests (the points rule in docs/AUTHORING.md);
* `q @ k.T` on batched keys is diagnosed from the exception it raises;
* a submission with two bugs is shown as two causes, each once, in the terminal.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import triton

from grader.core.course import Course
from grader.core.manifest import parse_manifest
from grader.core.records import TestOutcome
from grader.harness import degenerate
from grader.harness.differences import measure_difference, row_shifts
from grader.harness.runners import InProcessRunner, SandboxRunner
from grader.harness.testing import Check, GradingContext
from grader.harness.triton_api import API_PROBLEMS, explain_exception
from grader.render.report import failure_groups
from grader.sandbox.client import Sandbox
from grader.sandbox.limits import SandboxLimits
from tests.conftest import FIXTURES, ROOT, assignment_of, grade_workspace

KERNELS = FIXTURES / "triton_kernels"


@pytest.fixture(scope="module")
def course() -> Course:
    return Course(ROOT)


def _graded(course: Course, assignment: str, workspace: Path, task: str):
    result = grade_workspace(course, assignment, workspace, student="student", only_task=task,
                             allow_weak_sandbox=True, use_gpu=False)
    return result, [o for o in result.outcomes if o.task == task]


def _kernel_workspace(tmp_path: Path, fixture: str) -> Path:
    workspace = tmp_path / "student"
    workspace.mkdir()
    shutil.copyfile(KERNELS / f"{fixture}.py", workspace / "flash.py")
    return workspace


def _task(result, task_id: str):
    return next(t for t in result.score.tasks if t.task_id == task_id)


# ------------------------------------------------------------------ 1. crashes


@pytest.mark.sandbox
def test_a_kernel_that_crashes_at_one_token_still_earns_the_other_shapes(course, tmp_path):
    result, outcomes = _graded(course, "assignment3", _kernel_workspace(tmp_path, "crash_at_one_token"),
                               "flash_forward")
    single = [o for o in outcomes if "test_single_token" in o.name]  # N = 1, then a tail in the same test
    others = [o for o in outcomes if "test_single_token" not in o.name]
    assert single and all(o.status == "failed" and o.kind == "crashed" for o in single), single
    assert all("SIGSEGV" in o.message and "started again" in o.message and "not run again" not in o.message
               for o in single)
    assert all("mask" in o.message and "§24" in o.message for o in single)  # the interpreter's usual cause
    assert others and all(o.status == "passed" for o in others), [(o.name, o.message) for o in others]
    task = _task(result, "flash_forward")
    assert 0 < task.earned < task.points and task.passed == len(others)
    groups = failure_groups(result.outcomes)
    assert len(groups) == 1 and len(groups[0].outcomes) == len(single)


CRASHY = b'''
import ctypes

def crashes_when_long(x):
    if x.shape[0] > 1:
        ctypes.string_at(0)
    return x * 2
'''


@pytest.mark.sandbox
def test_a_crash_marks_its_inputs_and_every_other_call_still_runs():
    box = Sandbox({"m.py": CRASHY}, ["m.py"], limits=SandboxLimits(call_timeout_s=60, submission_budget_s=600))
    runner = SandboxRunner(box)
    try:
        def call(n: int, dtype=torch.float32):
            return runner.call("crashes_when_long", (torch.ones(n, dtype=dtype),), {})

        first = call(2)
        assert first.status == "crashed" and "segmentation fault" in first.detail
        restarts = box.restarts
        again = call(2)  # the same signature: not run, nothing restarted
        assert again.status == "crashed_before" and box.restarts == restarts
        assert "earlier test" in again.detail and "segmentation fault" in again.detail
        assert call(2, torch.float64).status == "crashed"  # another dtype is another signature: it runs
        assert call(1).status == "ok"
        # more crashing shapes in a row than the streak rule allowed (3): a good call still runs after them
        assert [call(n).status for n in range(3, 8)] == ["crashed"] * 5
        assert call(1).status == "ok" and call(1, torch.float64).status == "ok"
        assert len(runner.crashed_signatures["crashes_when_long"]) == 7  # one restart per signature
        assert [call(n).status for n in range(2, 8)] == ["crashed_before"] * 6
        assert box.restarts == restarts + 6
    finally:
        box.close()


def _grade_flash_forward_in_order(course: Course, workspace: Path, order: list[str] | None,
                                  seed: int) -> list[TestOutcome]:
    # What grading does for a kernel task (grader.pipeline.grading), with the hidden tests run in `order`.
    from grader.harness.reference import course_imports, load_reference
    from grader.harness.suite import run_suite
    from grader.intake.kernels import kernel_module
    from grader.pipeline.grading import open_submission

    assignment = assignment_of(course, "assignment3")
    contract = assignment.manifest.contract
    submission = open_submission(assignment, workspace, student="student")
    kernels = kernel_module(contract.file, submission.text(contract.file), contract.kernels)
    box = Sandbox({contract.file: kernels.source.encode(), contract.module: assignment.contract_module.read_bytes()},
                  [contract.module], limits=assignment.manifest.limits, use_gpu=False)
    try:
        runner = SandboxRunner(box)
        with course_imports(course.root):
            reference, mutants = load_reference(assignment)
            context = GradingContext(runner=runner, manifest=assignment.manifest, reference=reference,
                                     mutants=mutants, seed=seed, device="cpu", hidden=True, kernel_runner=runner)
            outcomes, errors = run_suite(assignment.hidden_tests, context, only_task="flash_forward", order=order)
    finally:
        box.close()
    assert not errors
    return outcomes


@pytest.mark.sandbox
@pytest.mark.timeout(900)  # two gradings of the kernel suite with ten restarts each, on a loaded machine
def test_a_kernel_that_crashes_on_some_shapes_keeps_every_test_it_passes_in_any_order(course, tmp_path):
    # crash_on_tails ends the process on every non-causal call whose N is not a multiple of 64. A streak
    # rule stopped such a kernel when the crashing tests came first, and it lost its passing tests.
    from grader.harness.suite import collected_names

    names = collected_names(assignment_of(course, "assignment3").hidden_tests, "flash_forward")
    workspace = _kernel_workspace(tmp_path, "crash_on_tails")

    def passes(name: str) -> bool:  # causal, or N = 128 (exact multiple), or causal strided inputs
        return name.endswith("True]") or "exact_multiple" in name or "non_contiguous" in name

    expected = {n for n in names if passes(n)}
    assert len(expected) >= 10 and len(names) - len(expected) >= 9
    for order_name, order in (("reversed", names[::-1]), ("crashing tests first", sorted(names, key=passes))):
        outcomes = _grade_flash_forward_in_order(course, workspace, order, seed=7)
        assert [o.name for o in outcomes] == order, order_name  # run in that order
        passed = {o.name for o in outcomes if o.status == "passed"}
        assert passed == expected, (order_name, [(o.name, o.message) for o in outcomes if o.status != "passed"])
        crashed = [o for o in outcomes if o.status == "failed"]
        assert len(crashed) == len(names) - len(expected) and all(o.kind == "crashed" for o in crashed)
        for o in crashed:
            assert o.diagnosis["id"] == "triton_kernel_out_of_bounds" and o.diagnosis["section"] == "§24"
            assert "mask" in o.diagnosis["explanation"]
            inputs = o.problem["inputs"]  # which inputs ended the process, as data
            assert [i["argument"] for i in inputs] == ["1", "2", "3", "causal"] + (
                ["sm_scale"] if "sm_scale" in o.name else [])
            assert inputs[3]["value"] == "False" and inputs[0]["shape"][2] % 64 != 0
            assert "ended the process" in o.measured and str(tuple(inputs[0]["shape"])) in o.measured
        groups = failure_groups(outcomes)
        assert len(groups) == 1 and len(groups[0].outcomes) == len(crashed)


# ------------------------------------------------------------ 2. Triton APIs


# The Triton API problems are those of Triton 3.9's interpreter; an older Triton (the newest one
# published for Python 3.10 is 3.7) still runs block pointers, and then has nothing to explain.
TRITON_VERSION = tuple(int(part) for part in triton.__version__.split(".")[:2])
API_REMOVED_IN = (3, 9)
REMOVED_IN_3_9 = {"triton_block_ptr_removed", "triton_advance_removed", "triton_boundary_check"}


@pytest.mark.sandbox
def test_a_block_pointer_kernel_is_told_what_to_write_instead(course, tmp_path):
    result, outcomes = _graded(course, "assignment3", _kernel_workspace(tmp_path, "block_pointers"),
                               "flash_forward")
    if TRITON_VERSION < API_REMOVED_IN:  # block pointers run here: the advice must not be given
        assert outcomes and not any((o.diagnosis or {}).get("id") == "triton_block_ptr_removed" for o in outcomes)
        pytest.skip(f"Triton {triton.__version__} still runs tl.make_block_ptr (removed in 3.9)")
    assert outcomes and all(o.status == "failed" and o.kind == "raised" for o in outcomes)
    for o in outcomes:
        assert o.diagnosis["id"] == "triton_block_ptr_removed" and o.diagnosis["source"] == "api"
        assert "Testing on a machine without a GPU" in o.diagnosis["handout"]
        assert "pointer" in o.diagnosis["explanation"] and "mask=" in o.diagnosis["explanation"]
        assert "Likely cause: tl.make_block_ptr no longer exists" in o.message and "§24" in o.message
        assert o.measured.startswith("raised InterpreterError")
    groups = failure_groups(result.outcomes)
    assert len(groups) == 1 and len(groups[0].outcomes) == len(outcomes)


PROBES = textwrap.dedent('''
    import json, sys
    import torch, triton, triton.language as tl

    @triton.jit
    def block_ptr(X, Y, N, B: tl.constexpr):
        p = tl.make_block_ptr(X, shape=(N,), strides=(1,), offsets=(0,), block_shape=(B,), order=(0,))
        tl.store(Y + tl.arange(0, B), tl.load(p, boundary_check=(0,)))

    @triton.jit
    def advance(X, Y, N, B: tl.constexpr):
        o = tl.arange(0, B)
        tl.store(Y + o, tl.load(tl.advance(X + o, (B,))))

    @triton.jit
    def boundary(X, Y, N, B: tl.constexpr):
        o = tl.arange(0, B)
        tl.store(Y + o, tl.load(X + o, boundary_check=(0,)))

    @triton.jit
    def arange(X, Y, N, B: tl.constexpr):
        o = tl.arange(0, 48)
        tl.store(Y + o, tl.load(X + o))

    @triton.jit
    def libdevice(X, Y, N, B: tl.constexpr):
        o = tl.arange(0, B)
        tl.store(Y + o, tl.libdevice.exp(tl.load(X + o)))

    @triton.jit
    def extra(X, Y, N, B: tl.constexpr):
        o = tl.arange(0, B)
        tl.store(Y + o, tl.extra.cuda.libdevice.exp(tl.load(X + o)))

    @triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=["N"])
    @triton.jit
    def autotuned(X, Y, N, B: tl.constexpr):
        o = tl.arange(0, B)
        tl.store(Y + o, tl.load(X + o, mask=o < N), mask=o < N)

    seen = {}
    for name, kernel, kw in [("triton_block_ptr_removed", block_ptr, {"B": 16}),
                             ("triton_advance_removed", advance, {"B": 16}),
                             ("triton_boundary_check", boundary, {"B": 16}),
                             ("triton_arange_not_power_of_two", arange, {"B": 16}),
                             ("triton_libdevice_moved", libdevice, {"B": 16}),
                             ("triton_gpu_only_function", extra, {"B": 16}),
                             ("triton_autotune_without_gpu", autotuned, {})]:
        try:
            kernel[(1,)](torch.randn(64), torch.empty(64), 16, **kw)
            seen[name] = None
        except Exception as exc:
            seen[name] = {"type": type(exc).__name__, "message": str(exc)}
    json.dump(seen, sys.stdout)
''')


@pytest.mark.slow
def test_the_api_problems_are_what_the_installed_triton_raises(tmp_path):
    """Every entry of API_PROBLEMS is checked against the exception this Triton's interpreter raises."""
    done = subprocess.run([sys.executable, "-c", PROBES], capture_output=True, text=True, timeout=300,
                          env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert set(seen) == {p.id for p in API_PROBLEMS}
    checked = 0
    for expected, raised in seen.items():
        if expected in REMOVED_IN_3_9 and TRITON_VERSION < API_REMOVED_IN:
            continue  # this older Triton still has block pointers: the probe misuses them instead
        assert raised is not None, f"{expected}: this Triton ({triton.__version__}) ran it without an error"
        found = explain_exception(raised)
        assert found is not None and found.mutant_id == expected, (expected, raised)
        assert found.section == "§24" and found.handout
        checked += 1
    assert checked == len(seen) - (len(REMOVED_IN_3_9) if TRITON_VERSION < API_REMOVED_IN else 0)


# ------------------------------------------------------- 3. tile-dependent bugs


@pytest.mark.sandbox
def test_a_tail_key_bug_with_16_wide_tiles_is_diagnosed_at_16(course, tmp_path):
    result, outcomes = _graded(course, "assignment3", _kernel_workspace(tmp_path, "tail_keys_16"),
                               "flash_forward")
    failed = [o for o in outcomes if o.status == "failed"]
    # every failure is the tail bug, named; anything else (a timeout, the budget, a test error) says what it was
    undiagnosed = [(o.name, o.kind, o.message[:300]) for o in failed
                   if (o.diagnosis or {}).get("id") != "flash_tail_keys_unmasked"]
    assert failed and not undiagnosed, undiagnosed
    sizes = [sorted(v["BLOCK_N"] for v in o.diagnosis["variants"]) for o in failed]
    assert all(16 in s and 64 not in s and 128 not in s for s in sizes), sizes
    assert [16] in sizes  # a length such as N = 70 tells 16 from 32
    assert any("reproduced with BLOCK_N = 16" in o.message for o in failed)
    assert any(o.status == "passed" for o in outcomes)  # causal attention hides the bug: partial credit
    groups = failure_groups(result.outcomes)
    assert len(groups) == 1 and groups[0].variants == "BLOCK_N = 16"  # the one size every test agrees on


# -------------------------------------------------- 4. softmax-equivalent results


@pytest.mark.sandbox
def test_the_bloom_alibi_bias_is_explained_as_a_shift_softmax_ignores(course):
    result, outcomes = _graded(course, "assignment2", FIXTURES / "assignment2_alibi_bloom", "alibi")
    slopes = [o for o in outcomes if "slopes" in o.name]
    values = [o for o in outcomes if o.name.split("::")[1] in
              ("test_bias_square", "test_bias_one_query_at_the_end", "test_bias_fewer_queries_than_keys_six_heads")]
    assert slopes and all(o.status == "passed" for o in slopes)  # the ALiBi authors' slopes are right
    assert len(values) == 3 and all(o.status == "failed" for o in values)  # the points rule: no points
    for o in values:
        assert o.problem["key"] == "values:row_constant" and o.problem["row_shifts"]
        assert "softmax" in o.measured and "ignores" in o.measured and "§21" in o.message
    # with one query, +m·j is exactly the top-left alignment: that is the only diagnosis
    assert {(o.diagnosis or {}).get("id") for o in values} <= {None, "alibi_bias_top_left"}
    task = _task(result, "alibi")
    assert task.earned < task.points


def test_a_per_row_constant_is_found_in_any_output_of_two_or_more_dimensions():
    expected = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    shift = torch.randn(2, 3, 4, 1, dtype=torch.float64)
    found = row_shifts(expected + shift, expected, 1e-7, 1e-9)
    assert found is not None and torch.allclose(found, shift.squeeze(-1))
    masked = expected.masked_fill(torch.eye(5, dtype=torch.bool)[:4], float("-inf"))  # -inf where masked
    assert row_shifts(masked + 0.5, masked, 1e-7, 1e-9) is not None
    assert row_shifts(expected * 2, expected, 1e-7, 1e-9) is None
    assert row_shifts(expected + torch.randn(1, 1, 1, 5, dtype=torch.float64), expected, 1e-7, 1e-9) is None
    assert row_shifts(expected[..., :1] + 1, expected[..., :1], 1e-7, 1e-9) is None  # one column: nothing to tell



def test_a_float64_result_computed_in_float32_is_named_as_such():
    """HF's eager attention takes its softmax in float32 whatever the input: on a float64 call the
    result is float32-accurate, which the measured description says, with what to keep."""
    scores = torch.randn(2, 4, 6, 9, dtype=torch.float64) * 3
    expected = torch.softmax(scores, dim=-1)
    in_float32 = torch.softmax(scores, dim=-1, dtype=torch.float32).to(torch.float64)
    found = measure_difference(in_float32, expected)
    assert found.key == "values:float32_precision", found.text
    assert "float32" in found.text and "keep the input's dtype" in found.text
    wrong = measure_difference(expected + 1e-3, expected)  # a real error, bigger than float32's
    assert wrong.key != "values:float32_precision" and "float32 arithmetic" not in wrong.text
    assert measure_difference(in_float32.float(), expected.float() + 1e-3).key != "values:float32_precision"


# ------------------------------------------------------------ 5. exceptions


@pytest.mark.sandbox
def test_batched_k_T_is_diagnosed_from_the_exception_it_raises(course):
    result, outcomes = _graded(course, "assignment1", FIXTURES / "assignment1_k_T", "attention_scores")
    raised = [o for o in outcomes if o.status == "failed"]
    assert len(raised) == 7 and all(o.kind == "raised" for o in raised)
    assert all(o.diagnosis["id"] == "scores_k_T_batched" and o.diagnosis["matched"] == "exception"
               for o in raised)
    assert all("k.transpose(-2, -1)" in o.message and "§6" in o.message for o in raised)
    assert [o.status for o in outcomes if o.name.endswith("test_unbatched_cross_shapes")] == ["passed"]
    groups = failure_groups(result.outcomes)
    assert len(groups) == 1 and len(groups[0].outcomes) == 7



@pytest.mark.sandbox
def test_an_exception_nothing_explains_names_its_inputs_and_the_contract(course, tmp_path):
    """GPT-NeoX's ALiBi asserts a single query whenever n_q != n_k: the student's own assert
    is named as such, with the shapes it refused and the section of the contract."""
    workspace = tmp_path / "student"
    workspace.mkdir()
    source = (ROOT / "reference" / "assignment2" / "positions.py").read_text()
    source = source.replace('    slopes = alibi_slopes(n_heads)  # (H,)\n',
                            '    assert n_q == n_k or n_q == 1, "one query, or as many as keys"\n'
                            '    slopes = alibi_slopes(n_heads)  # (H,)\n', 1)
    (workspace / "positions.py").write_text(source)
    result, outcomes = _graded(course, "assignment2", workspace, "alibi")
    raised = [o for o in outcomes if o.kind == "raised"]
    assert raised and all(o.diagnosis is None for o in raised)
    for o in raised:
        assert "Your own assert stopped it on these inputs" in o.message, o.message
        assert "must handle them" in o.message and "§21" in o.message
        n_heads, n_q, n_k = map(int, re.search(r"these inputs: (\d+), (\d+), (\d+)\.", o.message).groups())
        assert n_q not in (1, n_k)  # exactly the shapes the assert refused
    assert any(o.status == "passed" for o in outcomes if "square" in o.name)  # n_q == n_k still earns
    assert _task(result, "alibi").earned < _task(result, "alibi").points


# --------------------------------------------------------- 6. one cause, once


@pytest.mark.sandbox
def test_the_terminal_names_each_cause_once(course):
    from rich.console import Console

    from grader.cli.console import print_terminal

    result = grade_workspace(course, "assignment1", FIXTURES / "assignment1_two_causes",
                                                          student="student", allow_weak_sandbox=True)
    console = Console(record=True, width=200)
    print_terminal(result, console)
    text = console.export_text()
    for title, count in (("k.T used on batched keys", 7), ("masked scores set to 0 instead of -inf", None)):
        assert text.count(title) == 1, text
        line = next(line for line in text.splitlines() if title in line)
        if count:
            assert line.endswith(f"— {count} tests")
    for outcome in result.outcomes:
        if outcome.status == "failed":
            assert text.count(outcome.name.split("::")[1]) >= 1


# ------------------------------------------------ 7. one tolerance, as data


@pytest.fixture
def make_check(tmp_path):
    (tmp_path / "s.py").write_text("def f(x):\n    return x\n")
    manifest = parse_manifest({"id": "a", "files": ["s.py"], "tasks": [
        {"id": "t", "points": 1, "functions": ["f"], "sections": ["§10"]}]})

    def build():
        context = GradingContext(runner=InProcessRunner(tmp_path, ("s.py",)), manifest=manifest,
                                 reference={}, mutants=[], seed=3)
        return Check(context, "test::node", "t")

    return build


def test_the_explanation_uses_the_tolerance_of_the_verdict(make_check):
    check = make_check()
    expected = torch.zeros(4, 10)
    actual = expected.clone()
    actual[:2] += 5e-4  # inside the test's tolerance of 1e-3, far outside float32's default
    actual[2:] += 5e-3  # outside both
    with pytest.raises(AssertionError) as info:
        check.compare(actual, expected, what="f", rtol=1e-3, atol=1e-3)
    assert "20 of 40 values out of tolerance" in str(info.value) and "rtol=0.001, atol=0.001" in str(info.value)
    problem = check.record["problem"]
    assert problem["out_of_tolerance"] == 20 and problem["rtol"] == 1e-3 and problem["atol"] == 1e-3
    assert check.record["measured"] in str(info.value)
    check.compare(expected + 5e-4, expected, what="f", rtol=1e-3, atol=1e-3)  # the same tolerance passes it


def test_the_heatmap_shows_the_slice_that_differs(make_check):
    check = make_check()
    expected = torch.rand(2, 3, 20, 20)
    actual = expected.clone()
    actual[1, 2, 17, 3] += 0.5  # one batch/head slice, far from the top-left corner
    with pytest.raises(AssertionError):
        check.compare(actual, expected, what="f", heatmap=True)
    heatmap = check.record["heatmap"]
    assert heatmap["slice"] == [1, 2]
    (r0, r1), (c0, c1) = heatmap["rows"], heatmap["cols"]
    assert r0 <= 17 < r1 and c0 <= 3 < c1 and r1 - r0 == 16
    assert heatmap["student"] != heatmap["reference"] and heatmap["max_diff"] == pytest.approx(0.5)


def test_outcomes_stored_before_problems_were_kept_still_load():
    stored = TestOutcome(name="t", task="x", status="failed", kind="wrong", message="m").to_dict()
    del stored["problem"]
    outcome = TestOutcome.from_dict(stored)
    assert outcome.problem is None
    assert failure_groups([outcome])[0].key == ("message", "wrong:m")


@pytest.mark.sandbox
def test_a_bfloat16_kernel_gets_the_interpreter_hint(course, tmp_path):
    result, outcomes = _graded(course, "assignment3", _kernel_workspace(tmp_path, "bf16_products"), "flash_forward")
    assert outcomes and all(o.status == "failed" for o in outcomes)
    for o in outcomes:  # float32 results are wildly off; float16 ones overflow to a constant inf
        assert o.kind in ("wrong", "degenerate"), (o.kind, o.message)
        assert o.diagnosis["id"] == "triton_bf16_interpreter" and o.diagnosis["source"] == "api"
        assert "interpreter" in o.message and "§24" in o.message


def test_a_constant_infinite_result_is_described():
    found = degenerate.suspicions(torch.full((2, 3), float("inf")), (torch.ones(2, 3),), {})
    assert [s.detail for s in found] == ["the same number, inf, everywhere"]

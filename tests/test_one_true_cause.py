"""Feedback that never contradicts itself: each line of a failure is true of the student's code.

* a result that is constant on a test's inputs but depends on them (a naive softmax whose overflow was
  guarded to 0) is a wrong value, not a placeholder; a result measured not to depend on the inputs is;
* a mistake that equals the reference on a test's inputs is never that test's hint;
* a failure that is only a dtype, a shape or a device says exactly that, with no other cause;
* the kernel panel reads its counts in the light of the verdict: a wrong output is never "nothing to change";
* one bug, one cause: a task that fails only because another task's function of the student's is wrong
  (measured: the rest computed by the course from that function's output reproduces the result) says
  which function to fix first, and each such dependency is stated in the handout;
* a forbidden API reached through the student's own helper names that helper.
"""

# One module because each test is one case of one list (feedback that never contradicts itself), sharing the
# catalogue and the in-process `student` check built once; the sandbox and slow cases are marked as such.

from __future__ import annotations

import textwrap

import pytest
import torch

from grader.core.course import Course
from grader.core.records import TestOutcome
from grader.harness.reference import load_dependencies, load_reference
from grader.harness.runners import InProcessRunner
from grader.harness.testing import Check, GradingContext, StudentProblem
from grader.render.behaviour import behaviour_view
from tests.conftest import ROOT, assignment_of


@pytest.fixture(scope="module")
def course() -> Course:
    return Course(ROOT)


@pytest.fixture(scope="module")
def catalogue(course):
    """{assignment id: (reference functions, mutants)}, loaded once."""
    return {a: (*load_reference(assignment_of(course, a)), load_dependencies(assignment_of(course, a)))
            for a in ("assignment1", "assignment2")}


@pytest.fixture
def student(tmp_path, course, catalogue):
    """A Check over a student file written from `source`, with an assignment's real reference and catalogue."""

    def build(assignment: str, filename: str, source: str, task: str) -> Check:
        folder = tmp_path / assignment
        folder.mkdir(exist_ok=True)
        (folder / filename).write_text(textwrap.dedent(source))
        reference, mutants, compositions = catalogue[assignment]
        manifest = assignment_of(course, assignment).manifest
        context = GradingContext(runner=InProcessRunner(folder, (filename,)), manifest=manifest,
                                 reference=reference, mutants=mutants, compositions=compositions, seed=5)
        return Check(context, f"test::{task}", task)

    return build


NAIVE_SOFTMAX = """
import torch

def softmax(x, dim=-1):
    e = torch.exp(x)
    return torch.nan_to_num(e / e.sum(dim=dim, keepdim=True), nan=0.0)  # 0/0 and inf/inf guarded
"""

PLACEHOLDER_SOFTMAX = """
import torch

def softmax(x, dim=-1):
    return torch.zeros_like(x)
"""


def test_a_naive_softmax_zeroed_by_overflow_is_not_called_a_placeholder(student):
    check = student("assignment1", "attention.py", NAIVE_SOFTMAX, "softmax")
    scores = check.randn(2, 3, 6) * 10 + 400.0  # every exp overflows: the guarded result is all zeros
    with pytest.raises(StudentProblem) as info:
        check.close("softmax", scores)
    text = str(info.value)
    assert "all zeros on these inputs" in text, text
    assert "placeholder" not in text and "does not depend on the inputs" not in text, text
    assert check.record["problem"]["key"] == "values:constant_here"
    assert info.value.kind == "wrong"


def test_a_result_that_never_depends_on_the_inputs_is_still_a_placeholder(student):
    check = student("assignment1", "attention.py", PLACEHOLDER_SOFTMAX, "softmax")
    with pytest.raises(StudentProblem) as info:
        check.close("softmax", check.randn(2, 3, 6) * 10 + 400.0)
    assert "placeholder" in str(info.value) and info.value.kind == "degenerate"
    assert check.record["problem"]["key"] == "degenerate:constant"


ROPE_FLOAT32 = """
import torch
from reference.assignment2.positions import apply_rope as _right

def apply_rope(x, positions, base=10000.0, scale=1.0):
    return _right(x.float(), positions, base, scale)  # right values, returned in float32
"""


def test_a_float16_rope_returned_in_float32_says_only_the_dtype(student, catalogue):
    reference, _, _ = catalogue["assignment2"]
    assert "apply_rope" in reference
    check = student("assignment2", "positions.py", ROPE_FLOAT32, "rope")
    x = check.randn(1, 2, 8, 16, dtype=torch.float16)
    positions = torch.arange(8)
    with pytest.raises(AssertionError) as info:
        check.close("apply_rope", x, positions)
    text = str(info.value)
    assert "Only the dtype is wrong" in text and "Likely cause" not in text, text
    assert check.record["problem"]["key"] == "only:dtype" and "diagnosis" not in check.record


def test_a_mutant_equal_to_the_reference_on_the_inputs_is_never_the_hint(catalogue):
    from grader.harness.diagnose import diagnose

    reference, mutants, _ = catalogue["assignment1"]
    scores = torch.randn(2, 4, 4)
    # with d_k = 1, "multiplied by sqrt(d_k)" and "divided by sqrt(d_k)" are the same thing
    right = reference["scale_scores"](scores, 1)
    wrong = scores * 3.0  # a mistake nothing in the catalogue makes
    assert diagnose(mutants, "scale_scores", (scores, 1), {}, right, expected=right) is None
    multiplied = next(m for m in mutants if m.id == "scale_multiplied")
    assert torch.allclose(multiplied.fn(scores, 1), right)
    assert diagnose(mutants, "scale_scores", (scores, 1), {}, wrong, expected=right) is None
    # where the mutant differs from the reference it is still found
    d4 = reference["scale_scores"](scores, 4)
    found = diagnose(mutants, "scale_scores", (scores, 4), {}, multiplied.fn(scores, 4), expected=d4)
    assert found is not None and found.mutant_id == "scale_multiplied"


def _probe(output_right: bool) -> dict:
    return {"n": 40, "n_kv": 40, "causal": False, "key_tiles": 1, "key_tiles_per_program": [1],
            "keys_visible_per_program": [40], "widest_key_tile": 64, "multiply_adds": 1, "widest_tile": 64,
            "rescales": 1, "bytes_stored": 1, "outside_loads": 0, "outside_stores": 0, "output_right": output_right}


@pytest.mark.parametrize(("status", "right", "expected"), [
    ("passed", True, "passed"), ("failed", False, "failed"), ("failed", True, "failed")])
def test_the_kernel_panel_reads_its_counts_in_the_light_of_the_verdict(status, right, expected):
    outcome = TestOutcome(name="test_what_the_kernel_does_as_n_grows", task="flash_forward", status=status,
                          kind="" if status == "passed" else "wrong", message="",
                          detail={"behaviour": {"measured": True, "probes": [_probe(right), _probe(True)],
                                                "findings": []}})
    view = behaviour_view(outcome)
    assert view["verdict"]["status"] == expected
    assert ("Nothing to change" in view["verdict"]["text"]) == (expected == "passed")


SDPA_THROUGH_SCALE = """
import torch

def attention_scores(q, k):
    return q @ k.transpose(-2, -1)

def scale_scores(scores, d_k):
    return scores / d_k  # should be sqrt(d_k)

def softmax(x, dim=-1):
    m = x.amax(dim=dim, keepdim=True).clamp(min=-1e30)
    e = torch.exp(x - m)
    s = e.sum(dim=dim, keepdim=True)
    return torch.where(s > 0, e / s, torch.zeros_like(e))

def scaled_dot_product_attention(q, k, v, mask=None):
    scores = scale_scores(attention_scores(q, k), q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v, weights
"""


def test_sdpa_failing_through_the_students_scale_scores_says_fix_scale_scores_first(student):
    check = student("assignment1", "attention.py", SDPA_THROUGH_SCALE, "scaled_dot_product_attention")
    q, k, v = check.randn(2, 5, 16), check.randn(2, 7, 16), check.randn(2, 7, 8)
    with pytest.raises(AssertionError) as info:
        check.close("scaled_dot_product_attention", q, k, v)
    text = str(info.value)
    assert "Fix scale_scores first" in text and "your scale_scores is wrong" in text, text
    assert check.record["diagnosis"]["id"] == "through:scale_scores"
    assert check.record["diagnosis"]["source"] == "dependency"


MHA_SPLIT_NO_TRANSPOSE = """
import math
import torch

def split_heads(x, n_heads):
    *batch, length, width = x.shape
    return x.reshape(*batch, n_heads, length, width // n_heads)  # scrambles tokens and heads

def merge_heads(x):
    *batch, n_heads, length, d_head = x.shape
    return x.transpose(-3, -2).reshape(*batch, length, n_heads * d_head)

def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, n_heads, mask=None):
    q, k, v = split_heads(x_q @ w_q.T, n_heads), split_heads(x_kv @ w_k.T, n_heads), split_heads(x_kv @ w_v.T, n_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.exp(scores - scores.amax(-1, keepdim=True))
    return merge_heads((w / w.sum(-1, keepdim=True)) @ v) @ w_o.T
"""


def test_mha_failing_through_split_heads_says_fix_split_heads_first(student):
    check = student("assignment2", "multihead.py", MHA_SPLIT_NO_TRANSPOSE, "multi_head_attention")
    d = 16
    x = check.randn(2, 6, d)
    weights = [check.randn(d, d) * 0.3 for _ in range(4)]
    with pytest.raises(AssertionError) as info:
        check.close("multi_head_attention", x, x, *weights, 4)
    text = str(info.value)
    assert "Fix split_heads first" in text and "(task heads)" in text, text
    assert check.record["diagnosis"]["id"] == "through:split_heads"


FORBIDDEN_THROUGH_SOFTMAX = """
import torch

def attention_scores(q, k):
    return q @ k.transpose(-2, -1)

def scale_scores(scores, d_k):
    return scores / d_k ** 0.5

def softmax(x, dim=-1):
    return torch.softmax(x, dim=dim)

def scaled_dot_product_attention(q, k, v, mask=None):
    weights = softmax(scale_scores(attention_scores(q, k), q.size(-1)), dim=-1)
    return weights @ v, weights
"""


def test_a_forbidden_call_through_the_students_softmax_names_it(student):
    check = student("assignment1", "attention.py", FORBIDDEN_THROUGH_SOFTMAX, "scaled_dot_product_attention")
    q, k, v = check.randn(3, 8), check.randn(4, 8), check.randn(4, 8)
    with pytest.raises(StudentProblem) as info:
        check.close("scaled_dot_product_attention", q, k, v)
    assert info.value.kind == "forbidden"
    assert "It comes through your softmax" in str(info.value), str(info.value)
    assert check.record["problem"]["through"] == "softmax"


@pytest.mark.parametrize("assignment", ["assignment1", "assignment2", "assignment3"])
def test_the_handout_states_every_dependency_the_grading_follows(course, assignment):
    """Each composition (a task's function built from other tasks' functions) is stated in the handout,
    in a sentence that names both functions and says the points depend on the helper."""
    readme = (assignment_of(course, assignment).folder / "README.md").read_text()
    paragraph = readme.split("## Points that depend on another task", 1)
    assert len(paragraph) == 2, "the handout has no section on points that depend on another task"
    section = paragraph[1].split("\n## ", 1)[0]
    for composition in load_dependencies(assignment_of(course, assignment)):
        assert f"`{composition.function}`" in section
        for helper in composition.uses:
            assert f"`{helper}`" in section, (composition.function, helper)


# ------------------------------------------------------------ quiz, bonus and status words read right


def test_blank_quiz_answers_are_one_cause_not_one_block_each(tmp_path):
    from grader.core.quiz import Question, grade_quiz
    from grader.render.report import failure_groups

    questions = [Question(f"q{i}", "numeric", f"question {i}", section="§9") for i in range(1, 8)]
    key = {q.id: 1.0 for q in questions}
    outcomes = grade_quiz(questions, key, "q1 = 1.0\nq2 = 5.0\n")  # one right, one wrong, five blank
    groups = failure_groups(outcomes)
    blank = [g for g in groups if g.key == ("problem", "quiz:blank")]
    assert len(blank) == 1 and [o.name for o in blank[0].outcomes] == [f"quiz::q{i}" for i in range(3, 8)]
    assert blank[0].title == "no answer given" and len(groups) == 2
    assert all(o.detail["answer"] == "blank" for o in blank[0].outcomes)


def test_an_untouched_bonus_kernel_that_stored_nothing_is_not_attempted_everywhere():
    from grader.render.presentation import not_attempted_ids
    from grader.render.report import render_html
    from grader.render.results import gradescope_results
    from tests.test_student_presentation import KERNELS, outcome, result, terminal

    empty = {"key": "degenerate:nan", "summary": "returned NaN where the right answer has none",
             "text": "stored nothing: every output element is still NaN", "nothing_stored": True}
    outcomes = [outcome("backward", f"test_flash_backward::test_gradients[{i}]", "failed", "degenerate",
                        "your _flash_bwd_dq_kernel stored nothing", problem=empty) for i in range(2)]
    outcomes += [outcome("forward", "test_flash_forward::test_small"), outcome("quiz", "quiz::q1")]
    for mode in ("check", "submit"):
        graded = result(outcomes, mode=mode)
        assert not_attempted_ids(graded) == {"backward"}
        text, _ = terminal(graded)
        assert "✗ backward" not in text and "placeholder" not in text and "Bonus task not attempted" in text
    html = render_html(result(outcomes), ROOT / "templates")
    section = html[html.index('<section id="task-backward">'):]
    assert 'data-not-attempted="backward"' in section[:section.index("</section>")]
    data = gradescope_results(result(outcomes), KERNELS)
    assert all(t["output"].startswith("**Bonus task not attempted**") for t in data["tests"]
               if t["tags"][0] == "backward")
    # a bonus kernel that stores something wrong is attempted, and fails
    wrong = [outcome("backward", "test_flash_backward::test_gradients[0]", "failed", "degenerate", "NaN in 3",
                     problem={**empty, "nothing_stored": False})]
    assert not_attempted_ids(result(wrong + outcomes[2:])) == set()


def test_no_raw_status_names_in_check():
    from tests.test_student_presentation import outcome, result, terminal

    graded = result([outcome("forward", "test_flash_forward::test_small"), outcome("quiz", "quiz::q1")], mode="check")
    assert any(t.status == "no_tests" for t in graded.score.tasks), [t.status for t in graded.score.tasks]
    text, _ = terminal(graded)
    assert "no_tests" not in text and "no public test" in text
    from grader.render.report import render_html
    assert ">no_tests<" not in render_html(graded, ROOT / "templates")


# ------------------------------------------------------------ the natural-log LSE in the backward kernels


def test_a_backward_reading_lse_as_a_natural_log_is_diagnosed(course, tmp_path):
    """The catalogue's patch (the mistake written into the reference's backward kernels, as validate grades
    it) run through Triton's interpreter gives what the mutant's emulation gives, and the diagnosis of
    that output names the mutant, not "See lecture §24" alone."""
    import importlib.util

    from grader.authoring.workspaces import patched
    from grader.harness.contract import load_launchers
    from grader.harness.diagnose import diagnose

    assignment = assignment_of(course, "assignment3")
    reference, mutants = load_reference(assignment)
    found = [m for m in mutants if m.id == "flash_bwd_lse_natural_log"]
    assert len(found) == 1 and found[0].function == "launch_backward"
    mutant = found[0]
    text = patched(mutant, (assignment.reference / "flash.py").read_text(), "flash.py")
    (tmp_path / "flash_lse.py").write_text(text)
    spec = importlib.util.spec_from_file_location("flash_lse_natural", tmp_path / "flash_lse.py")
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    launch = load_launchers(assignment.manifest.contract, assignment.contract_module, kernels)["launch_backward"]
    gen = torch.Generator().manual_seed(3)
    for h, h_kv, causal in ((2, 2, False), (4, 2, True)):
        q, do = (torch.randn(1, h, 40, 16, generator=gen) for _ in range(2))
        k, v = (torch.randn(1, h_kv, 40, 16, generator=gen) for _ in range(2))
        wrong = launch(q, k, v, do, causal=causal)
        right = reference["launch_backward"](q, k, v, do, causal=causal)
        emulated = mutant.fn(q, k, v, do, causal=causal)
        assert not all(torch.allclose(a, b, atol=1e-3) for a, b in zip(wrong, right, strict=True))
        for a, b in zip(wrong, emulated, strict=True):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-4 * float(b.abs().max())), float((a - b).abs().max())
        diagnosis = diagnose(mutants, "launch_backward", (q, k, v, do), {"causal": causal}, wrong, 1e-4,
                             1e-4 * max(float(g.abs().max()) for g in right), expected=right)
        assert diagnosis is not None and diagnosis.mutant_id == "flash_bwd_lse_natural_log"


# ------------------------------------------------------------ contract rules named in the test's own message


def test_an_autotuned_contract_kernel_is_told_the_rule_in_the_test_message(course, tmp_path):
    from grader.harness.runners import InProcessRunner as Runner

    assignment = assignment_of(course, "assignment3")
    text = (assignment.reference / "flash.py").read_text()
    at = text.index("@triton.jit\ndef _flash_fwd_kernel")
    autotune = ('@triton.autotune(configs=[triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)], '
                'key=["N_Q"])\n')
    (tmp_path / "flash.py").write_text(text[:at] + autotune + text[at:])
    manifest = assignment.manifest
    reference, _ = load_reference(assignment)
    context = GradingContext(runner=Runner(tmp_path, manifest.files, manifest.contract, assignment.contract_module),
                             manifest=manifest, reference=reference, mutants=[], seed=1)
    check = Check(context, "test::autotune", "flash_forward")
    q, k, v = (check.randn(1, 1, 40, 16) for _ in range(3))
    with pytest.raises(StudentProblem) as info:
        check.call("launch_forward", q, k, v, causal=False)
    text = str(info.value)
    assert "_flash_fwd_kernel is decorated with @triton.autotune" in text, text
    assert "a contract kernel is @triton.jit alone" in text and "Rules" in text
    assert check.record["diagnosis"]["id"] == "contract_kernel_not_jit_alone"


# ------------------------------------------------------------ check and submit agree on a public test


@pytest.mark.slow  # the public kernel tests through Triton's interpreter, twice (about 80 s)
@pytest.mark.parametrize(("mutant_id", "launcher_passes"), [("flash_no_final_division", True),
                                                              ("launcher_contiguous_strides", False)])
def test_a_kernel_bug_costs_no_public_launcher_test_as_it_costs_no_hidden_one(course, tmp_path, mutant_id,
                                                                              launcher_passes):
    """The hidden tests judge flash_attention against the student's own kernel (a kernel bug costs
    flash_forward only); the public tests of flash_launcher must grade the same, whatever their names."""
    import subprocess
    import sys

    from tests.content_harness import mutant_workspace

    _, mutants = load_reference(assignment_of(course, "assignment3"))
    mutant = next(m for m in mutants if m.id == mutant_id)
    workspace = mutant_workspace(tmp_path / "w", "assignment3", mutant)
    public = ROOT / "assignments/assignment3/tests/test_public.py"
    done = subprocess.run([sys.executable, "-m", "pytest", str(public), "-q", "-p", "no:cacheprovider",
                           "-k", "flash_attention", "--grade-workspace", str(workspace)],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    tail = done.stdout[-1500:]
    assert "passed" in tail or "failed" in tail, tail + done.stderr[-1500:]
    assert (done.returncode == 0) == launcher_passes, tail


# ------------------------------------------------------------ no report of a mutant contradicts itself


def test_a_passing_kernel_panel_in_a_failing_task_is_not_green():
    outcome = TestOutcome(name="test_what_the_kernel_does_as_n_grows", task="flash_forward", status="passed",
                          kind="", message="", detail={"behaviour": {"measured": True, "probes": [_probe(True)],
                                                                     "findings": []}})
    assert behaviour_view(outcome, task_failed=False)["verdict"]["status"] == "passed"
    muted = behaviour_view(outcome, task_failed=True)["verdict"]
    assert muted["status"] == "muted" and "Nothing to change" not in muted["text"]


def test_contradictions_are_found_in_a_report():
    from grader.render.report import contradictions

    cause = {"title": "values out of tolerance", "detail": "", "tests": [{"line": ""}], "diagnosis": None}
    diagnosed = {**cause, "title": "running sum rescaled, accumulator not",
                 "diagnosis": {"title": "running sum rescaled, accumulator not"}}
    placeholder = {**cause, "title": "returned a placeholder: a constant that does not depend on the inputs"}
    green = {"verdict": {"status": "passed"}}
    assert contradictions({"tasks": [{"id": "t", "causes": [diagnosed], "behaviour": [green]}]})
    assert contradictions({"tasks": [{"id": "t", "causes": [placeholder, diagnosed], "behaviour": []}]})
    assert contradictions({"tasks": [{"id": "t", "causes": [{**diagnosed, "detail": "returned a placeholder"}],
                                      "behaviour": []}]})
    assert not contradictions({"tasks": [{"id": "t", "causes": [diagnosed], "behaviour": [{"verdict": {}}]},
                                         {"id": "u", "causes": [], "behaviour": [green]},
                                         {"id": "v", "causes": [placeholder], "behaviour": []}]})


def _catalogue_entries() -> list[tuple[str, str, str]]:
    """(assignment, mutant id, function) of every mutant in the three catalogues, read from their source."""
    import ast

    entries = []
    for assignment in ("assignment1", "assignment2", "assignment3"):
        tree = ast.parse((ROOT / "reference" / assignment / "mutants.py").read_text())
        for node in tree.body:
            for decorator in getattr(node, "decorator_list", []):
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == "mutant":
                    words = {k.arg: k.value.value for k in decorator.keywords if isinstance(k.value, ast.Constant)}
                    entries.append((assignment, words["id"], words["function"]))
    return entries


@pytest.mark.sandbox
@pytest.mark.slow  # every mutant of the three catalogues graded as a submission (its task's hidden tests)
@pytest.mark.parametrize(("assignment", "mutant_id", "function"), _catalogue_entries(),
                         ids=[e[1] for e in _catalogue_entries()])
def test_no_report_of_a_catalogue_mutant_contradicts_itself(course, tmp_path, assignment, mutant_id, function):
    from grader.render.report import contradictions, view_model
    from tests.conftest import grade_workspace
    from tests.content_harness import mutant_workspace

    _, mutants = load_reference(assignment_of(course, assignment))
    mutant = next(m for m in mutants if m.id == mutant_id)
    task = assignment_of(course, assignment).manifest.task_for_function(function).id
    workspace = mutant_workspace(tmp_path / "w", assignment, mutant)
    result = grade_workspace(course, assignment, workspace, student="mutant", only_task=task,
                             allow_weak_sandbox=True, use_gpu=False)
    view = view_model(result)
    assert contradictions(view) == [], contradictions(view)
    shown = next(t for t in view["tasks"] if t["id"] == task)
    assert shown["causes"], f"{mutant_id} fails no test of {task}"


def test_a_static_forbidden_finding_names_the_student_function_it_comes_through(course):
    from grader.core.scoring import score
    from grader.intake.static_checks import check_sources

    manifest = assignment_of(course, "assignment1").manifest
    findings, problems = check_sources(manifest, {"attention.py": textwrap.dedent(FORBIDDEN_THROUGH_SOFTMAX)})
    assert not problems
    sdpa = [f for f in findings if f.task == "scaled_dot_product_attention"]
    own = [f for f in findings if f.task == "softmax"]
    assert sdpa and all(f.where == "softmax" for f in sdpa) and own and all(f.where == "" for f in own)
    tasks = {t.task_id: t for t in score(manifest, [], findings).tasks}
    assert tasks["scaled_dot_product_attention"].status == "forbidden"
    assert "it comes through your softmax" in tasks["scaled_dot_product_attention"].reason
    assert "comes through" not in tasks["softmax"].reason


QUADRATIC_WINDOW = """
import torch

def sliding_window_attention(q, k, v, window):
    n = q.shape[-2]
    scores = torch.empty(4096, n, n)  # every score of full attention, for a band of them
    return scores
"""


def test_an_allocation_the_memory_limit_refuses_is_explained_not_shown_raw(tmp_path, course):
    folder = tmp_path / "a3"
    folder.mkdir()
    (folder / "efficient.py").write_text(textwrap.dedent(QUADRATIC_WINDOW))
    manifest = assignment_of(course, "assignment3").manifest
    context = GradingContext(runner=InProcessRunner(folder, ("efficient.py",)), manifest=manifest,
                             reference={}, mutants=[], seed=1)
    check = Check(context, "test::memory", "sliding_window")
    q = torch.zeros(1, 1, 16384, 2)
    with pytest.raises(StudentProblem) as info:
        check.call("sliding_window_attention", q, q, q, 64)
    text = str(info.value)
    assert "4,096 L × L matrices of float32 for L = 16384" in text and "Compute in blocks" in text, text
    assert check.record["diagnosis"]["id"] == "allocation_too_large"


def test_a_property_block_does_not_repeat_its_header_in_its_body(tmp_path):
    from grader.core.manifest import parse_manifest
    from grader.render.report import failure_groups

    (tmp_path / "s.py").write_text("def f(x):\n    return x * 2\n")
    manifest = parse_manifest({"id": "a", "files": ["s.py"], "tasks": [
        {"id": "t", "points": 1, "functions": ["f"], "sections": ["§10"]}]})
    check = Check(GradingContext(runner=InProcessRunner(tmp_path, ("s.py",)), manifest=manifest, reference={},
                                 mutants=[], seed=3), "test::p", "t")
    x = torch.ones(3)
    with pytest.raises(AssertionError) as info:
        check.holds("f(2x) = 2 f(x) + 1", check.call("f", x * 2), check.call("f", x) * 2 + 1, section="§10")
    outcome = TestOutcome(name="t::p", task="t", status="failed", kind="wrong", message=str(info.value),
                          problem=check.record["problem"])
    group = failure_groups([outcome])[0]
    assert "f(2x) = 2 f(x) + 1" in group.title
    assert "f(2x) = 2 f(x) + 1" not in group.detail() and "Measured:" in group.detail(), group.detail()
    assert "§10" in group.detail()


TWO_SIDED_WINDOW = """
import torch

def sliding_window_mask(n_q, n_k, window, device=None):
    i = torch.arange(n_q).unsqueeze(1) + (n_k - n_q)
    j = torch.arange(n_k).unsqueeze(0)
    return (i - j).abs() < window  # sees the future too
"""


def test_a_constant_mask_a_mutant_computes_is_not_a_placeholder(course, tmp_path):
    folder = tmp_path / "a3"
    folder.mkdir()
    (folder / "efficient.py").write_text(textwrap.dedent(TWO_SIDED_WINDOW))
    assignment = assignment_of(course, "assignment3")
    reference, mutants = load_reference(assignment)
    context = GradingContext(runner=InProcessRunner(folder, ("efficient.py",)), manifest=assignment.manifest,
                             reference=reference, mutants=mutants, seed=1)
    check = Check(context, "test::window", "sliding_window")
    with pytest.raises(AssertionError) as info:
        check.close("sliding_window_mask", 4, 4, 6)  # a window longer than the sequence: all True
    text = str(info.value)
    assert "placeholder" not in text and "all True on these inputs" in text, text
    assert check.record["diagnosis"]["id"] == "window_mask_two_sided"


@pytest.mark.sandbox
def test_one_bug_one_cause_in_a_real_grading(course, tmp_path):
    """Graded as grade submit grades (the sandbox, the hidden suite): SDPA failing through the student's own
    scale_scores says which function to fix first, in every failing SDPA test, and the forbidden-free
    helpers are called in the sandbox like the task's function."""
    from tests.conftest import grade_workspace

    workspace = tmp_path / "student"
    workspace.mkdir()
    (workspace / "attention.py").write_text(textwrap.dedent(SDPA_THROUGH_SCALE) + textwrap.dedent('''
        def causal_mask(n_q, n_k, device=None):
            i = torch.arange(n_q, device=device).unsqueeze(1)
            j = torch.arange(n_k, device=device).unsqueeze(0)
            return j <= i + (n_k - n_q)
        '''))
    result = grade_workspace(course, "assignment1", workspace, student="s", only_task="scaled_dot_product_attention",
                             allow_weak_sandbox=True, use_gpu=False)
    failed = [o for o in result.outcomes if o.task == "scaled_dot_product_attention" and o.status == "failed"]
    assert failed
    through = [o for o in failed if (o.diagnosis or {}).get("id") == "through:scale_scores"]
    assert len(through) >= len(failed) // 2, [(o.name, (o.diagnosis or {}).get("id"), o.message[:200]) for o in failed]
    assert all("Fix scale_scores first" in o.message for o in through)


def test_a_dtype_only_failure_a_mutant_makes_says_both(student):
    source = """
import torch

def causal_mask(n_q, n_k, device=None):
    i = torch.arange(n_q).unsqueeze(1)
    j = torch.arange(n_k).unsqueeze(0)
    return (j <= i + (n_k - n_q)).float()
"""
    check = student("assignment1", "attention.py", source, "causal_mask")
    with pytest.raises(AssertionError) as info:
        check.close("causal_mask", 3, 5)
    text = str(info.value)
    assert "Only the dtype is wrong" in text and check.record["diagnosis"]["id"] == "causal_mask_float", text


def test_a_kernel_still_the_handout_stub_is_not_written_not_a_placeholder(course, tmp_path):
    from grader.harness.reference import stub_sources

    assignment = assignment_of(course, "assignment3")
    manifest = assignment.manifest
    (tmp_path / "flash.py").write_text((assignment.folder / "flash.py").read_text())  # the stub, untouched
    reference, _ = load_reference(assignment)
    context = GradingContext(runner=InProcessRunner(tmp_path, manifest.files, manifest.contract,
                                                    assignment.contract_module),
                             manifest=manifest, reference=reference, mutants=[], seed=1,
                             stub_sources=stub_sources(assignment))
    check = Check(context, "test::gqa", "flash_gqa")
    q, k, v = check.randn(1, 4, 20, 16), check.randn(1, 2, 20, 16), check.randn(1, 2, 20, 16)
    with pytest.raises(StudentProblem) as info:
        check.call("launch_forward", q, k, v)
    assert "not written yet" in str(info.value) and "placeholder" not in str(info.value), str(info.value)
    assert check.record["problem"]["nothing_stored"] is True
    # the same stub graded without knowing the handout's stub: a placeholder, as before
    plain = Check(GradingContext(runner=context.runner, manifest=manifest, reference=reference, mutants=[], seed=1),
                  "test::gqa", "flash_gqa")
    with pytest.raises(StudentProblem) as info:
        plain.call("launch_forward", q, k, v)
    assert "placeholder" in str(info.value) and "nothing_stored" not in plain.record["problem"]

"""Degenerate outputs earn nothing: zeros, ones, a constant, NaN or an input handed back,
unless the trusted reference gives the same kind of answer on the same inputs."""

from __future__ import annotations

import shutil

import pytest
import torch

from grader.core.course import Course
from grader.core.manifest import load_manifest
from grader.harness import degenerate
from grader.harness.reference import load_reference
from grader.harness.runners import InProcessRunner
from grader.harness.testing import Check, GradingContext, StudentProblem
from tests.conftest import FIXTURES, ROOT, assignment_of, grade_workspace

MANIFEST = load_manifest(ROOT / "assignments" / "assignment1" / "assignment.toml")
REFERENCE, MUTANTS = load_reference(assignment_of(ROOT, "assignment1"))

PLACEHOLDERS = '''
import torch

def attention_scores(q, k):
    return torch.zeros(*q.shape[:-1], k.shape[-2])

def scale_scores(scores, d_k):
    return scores.clone()

def softmax(x, dim=-1):
    return torch.full_like(x, 1.0 / x.shape[dim])

def causal_mask(n_q, n_k, device=None):
    return torch.ones(n_q, n_k, dtype=torch.bool)

def scaled_dot_product_attention(q, k, v, mask=None):
    weights = torch.full((*q.shape[:-1], k.shape[-2]), 1.0 / k.shape[-2])
    return torch.zeros(*q.shape[:-1], v.shape[-1]), weights
'''


def _check(tmp_path, source: str, reference: dict | None = None, mutants=()) -> Check:
    (tmp_path / "attention.py").write_text(source)
    context = GradingContext(runner=InProcessRunner(tmp_path, ("attention.py",)), manifest=MANIFEST,
                             reference=REFERENCE if reference is None else reference,
                             mutants=list(mutants), seed=3, hidden=True)
    return Check(context, "test_degenerate::node", None)


@pytest.fixture
def placeholders(tmp_path) -> Check:
    return _check(tmp_path, PLACEHOLDERS, mutants=MUTANTS)


@pytest.fixture
def solution(tmp_path) -> Check:
    return _check(tmp_path, (ROOT / "reference" / "assignment1" / "attention.py").read_text())


def test_what_counts_as_degenerate():
    x = torch.randn(3, 4)
    kinds = lambda value, *args: [(s.item, s.kind, s.detail) for s in degenerate.suspicions(value, args, {})]
    assert kinds(torch.zeros(3, 4)) == [(None, "constant", "all zeros")]
    assert kinds(torch.ones(2, 2)) == [(None, "constant", "all ones")]
    assert kinds(torch.full((2, 3), 0.25)) == [(None, "constant", "the same number, 0.25, everywhere")]
    assert kinds(torch.ones(2, 2, dtype=torch.bool)) == [(None, "constant", "all True")]
    assert kinds(torch.zeros(2, 2, dtype=torch.bool)) == [(None, "constant", "all False")]
    assert kinds(x * float("nan")) == [(None, "nan", "NaN in 12 of its 12 elements")]
    assert kinds(x.clone(), x) == [(None, "input", "argument 1 unchanged")]
    assert kinds((x + 1, torch.zeros(2, 2)), x) == [(1, "constant", "all zeros")]
    assert kinds(x + 1, x) == [] and kinds(torch.tensor(0.0)) == [] and kinds(3) == []


@pytest.mark.parametrize("name, args, kwargs, words", [
    ("attention_scores", (torch.randn(2, 3, 4), torch.randn(2, 5, 4)), {}, "all zeros"),
    ("scale_scores", (torch.randn(4, 9), 16), {}, "argument 1 unchanged"),
    ("softmax", (torch.randn(5, 7),), {}, "the same number, 0.1429, everywhere"),
    ("causal_mask", (4, 4), {}, "all True"),
    ("scaled_dot_product_attention", (torch.randn(2, 6, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)), {},
     "item 0 of its result is all zeros"),
])
def test_placeholders_fail_even_where_a_property_holds(placeholders, name, args, kwargs, words):
    with pytest.raises(StudentProblem) as info:
        placeholders.call(name, *args, **kwargs)
    assert info.value.kind == "degenerate" and words in str(info.value) and name in str(info.value)
    assert placeholders.section_for(name).split(",")[0] in str(info.value)  # the lecture section


def test_a_property_test_no_longer_passes_for_uniform_weights(placeholders):
    """`rows sum to one` holds for uniform weights; the call itself now fails."""
    q, k, v = torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    with pytest.raises(StudentProblem, match="placeholder"):
        placeholders.call("scaled_dot_product_attention", q, k, v)


def test_a_degenerate_mutant_is_still_named(placeholders):
    with pytest.raises(StudentProblem) as info:
        placeholders.call("scale_scores", torch.randn(4, 9), 16)
    assert "Likely cause: scores returned unscaled" in str(info.value)
    assert placeholders.record["diagnosis"]["id"] == "scale_not_applied"


@pytest.mark.parametrize("name, args", [
    ("softmax", (torch.randn(3, 1),)),  # over a single key: all ones
    ("causal_mask", (1, 1)),  # a 1 × 1 mask: all True
    ("causal_mask", (1, 9)),  # one new query sees every key: all True
    ("scale_scores", (torch.randn(3, 4), 1)),  # d_k = 1 gives the input back
    ("scaled_dot_product_attention",  # every key masked: weights and output all zeros
     (torch.randn(2, 3, 4), torch.randn(2, 5, 4), torch.randn(2, 5, 4), torch.zeros(3, 5, dtype=torch.bool))),
    ("softmax", (torch.full((2, 4), float("-inf")),)),  # nothing to attend to: all zeros
])
def test_legitimately_degenerate_answers_pass(solution, name, args):
    value = solution.call(name, *args)
    solution.compare(value, REFERENCE[name](*args), what=name)


def test_nan_where_the_reference_has_nan_too_passes(tmp_path):
    check = _check(tmp_path, "import torch\ndef softmax(x, dim=-1):\n    return x * float('nan')\n",
                   reference={"softmax": lambda x, dim=-1: x * float("nan")})
    assert check.call("softmax", torch.randn(3)).isnan().all()


def test_without_a_reference_nothing_is_judged(tmp_path):
    check = _check(tmp_path, PLACEHOLDERS, reference={})  # grade check: public tests, no reference
    assert torch.equal(check.call("attention_scores", torch.randn(2, 3), torch.randn(4, 3)), torch.zeros(2, 4))


def test_an_ordinary_output_never_calls_the_reference(tmp_path):
    calls = []
    check = _check(tmp_path, "def scale_scores(scores, d_k):\n    return scores / d_k ** 0.5\n",
                   reference={"scale_scores": lambda s, d: calls.append(1) or s / d ** 0.5})
    check.call("scale_scores", torch.randn(4, 4), 4)
    assert calls == []


@pytest.mark.sandbox
@pytest.mark.parametrize("assignment_id", ["assignment1", "assignment2", "assignment3"])
def test_a_submission_of_placeholders_earns_nothing_through_the_real_grader(tmp_path, assignment_id):
    """Zeros, constants, all-True masks, an input handed back and a kernel that stores zeros earn
    nothing on every assignment: no hidden test's input makes such an answer right on its own
    (each degenerate case shares its test with an input only a real implementation gets)."""
    course = Course(ROOT)
    fixture = FIXTURES / f"{assignment_id}_degenerate"
    result = grade_workspace(course, assignment_id, fixture, seed=5)
    earned = {t.task_id: t.earned for t in result.score.tasks if t.earned}
    assert earned == {} and result.score.total == 0.0, earned
    passed = [o.name for o in result.outcomes if o.status == "passed"]
    assert passed == []
    if assignment_id != "assignment1":
        return
    assert {o.kind for o in result.outcomes if o.status == "failed" and o.task != "quiz"} == {"degenerate"}
    workspace = tmp_path / "reference"
    shutil.copytree(ROOT / "reference" / "assignment1", workspace, ignore=shutil.ignore_patterns("tests"))
    reference = grade_workspace(course, "assignment1", workspace, seed=5)
    assert reference.score.total == 100.0 and not reference.findings


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", ["assignment1", "assignment2", "assignment3"])
def test_validate_finds_no_hidden_test_that_a_placeholder_passes(assignment_id, monkeypatch):
    from grader.authoring.validate import degenerate_verdict

    if not torch.cuda.is_available():  # the reference's kernels answer for the placeholders here
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    course = Course(ROOT)
    verdict = degenerate_verdict(assignment_of(course, assignment_id))
    assert verdict.ok, verdict.detail


def test_validate_names_a_test_that_a_placeholder_passes(tmp_path):
    """A hidden test whose only input makes the answer an input handed back is reported, with the fix."""
    from grader.authoring.validate import degenerate_verdict

    root = tmp_path / "course"
    shutil.copytree(ROOT / "assignments" / "assignment1", root / "assignments" / "assignment1")
    shutil.copytree(ROOT / "reference" / "assignment1", root / "reference" / "assignment1")
    (root / "reference" / "__init__.py").write_text("")
    tests = root / "reference" / "assignment1" / "tests"
    for path in tests.glob("test_*.py"):
        path.unlink()
    (tests / "test_scale_scores.py").write_text(
        'import pytest\n\npytestmark = pytest.mark.task("scale_scores")\n\n\n'
        'def test_d_k_one_only(check):\n    check.close("scale_scores", check.randn(3, 4), 1)\n\n\n'
        'def test_d_k_four(check):\n    check.close("scale_scores", check.randn(3, 4), 4)\n')
    course = Course(root)
    verdict = degenerate_verdict(assignment_of(course, "assignment1"))
    assert not verdict.ok
    assert "test_scale_scores::test_d_k_one_only (its first tensor argument handed back)" in verdict.detail
    assert "test_d_k_four" not in verdict.detail and "pair each with an input" in verdict.detail

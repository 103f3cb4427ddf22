"""Assignment 1's content holds together: the reference passes every hidden test,
the stubs fail every test (cleanly, in the test body), and every mutant fails only
tests of its own task and is named by the diagnosis there. (That the manifest,
stubs, reference, quiz and key agree is grade validate's consistency checks,
tests/test_assignments_consistent.py.)

The suites run in two child processes (`python tests/test_assignment1_content.py
PART OUT.json`, see tests/content_harness.py) that share the mutants between them;
the tests below read what they saw. A mutant's workspace is the one `grade
validate` builds: the reference module, the mutant's source appended, and the
student function rebound to it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import content_harness as harness  # noqa: E402

ASSIGNMENT = ROOT / "assignments" / "assignment1"
REFERENCE = ROOT / "reference" / "assignment1"
HIDDEN = REFERENCE / "tests"
PUBLIC = ASSIGNMENT / "tests"
SEEDS = (20261214, 7)
TASK_IDS = ("attention_scores", "scale_scores", "softmax", "causal_mask",
            "scaled_dot_product_attention")
PARTS = 2  # two child processes share the mutants


def _mutants():
    from grader.harness.catalogue import load_mutants

    return load_mutants("reference.assignment1.mutants")


def _child(part: str) -> dict:
    """Share `part` of the suites (the reference, stubs and public tests go with part 0)."""
    runs: dict = {}
    if part == "0":
        runs["reference"] = [harness.run_suite([HIDDEN], REFERENCE, s) for s in SEEDS]
        runs["stubs"] = harness.run_suite([HIDDEN], ASSIGNMENT, SEEDS[0])
        runs["public_stubs"] = harness.run_suite([PUBLIC], ASSIGNMENT, SEEDS[0])
        runs["public_reference"] = harness.run_suite([PUBLIC], REFERENCE, SEEDS[0])
    runs["mutants"] = harness.run_mutants("assignment1", _mutants()[int(part)::PARTS], lambda m: [HIDDEN],
                                          lambda: SEEDS[0])
    return runs


# --------------------------------------------------------------------- the tests


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    return harness.run_children(Path(__file__), [str(i) for i in range(PARTS)], tmp_path_factory.mktemp("a1"),
                                timeout_s=600)


@pytest.mark.slow
def test_reference_passes_every_hidden_test(runs):
    for run in runs["reference"]:
        assert not harness.reference_problems(run), harness.reference_problems(run)


@pytest.mark.slow
def test_every_hidden_test_has_exactly_one_known_task(runs):
    tasks = {nodeid: t["task"] for nodeid, t in runs["reference"][0]["tests"].items()}
    assert all(task in TASK_IDS for task in tasks.values()), tasks
    assert set(tasks.values()) == set(TASK_IDS)


@pytest.mark.slow
def test_hidden_test_names_are_unique_across_files(runs):
    # The grading suite (grader/harness/suite.py) names an outcome by the test function alone,
    # so two files with a test of the same name would shadow each other's failures.
    names = [nodeid.split("::", 1)[-1] for nodeid in runs["reference"][0]["tests"]]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["stubs", "public_stubs"])
def test_stubs_fail_every_test_in_the_test_body(runs, name):
    assert not harness.stub_problems(runs[name]), harness.stub_problems(runs[name])


@pytest.mark.slow
def test_public_tests_pass_on_the_reference(runs):
    problems = harness.reference_problems(runs["public_reference"])
    assert not problems, problems


@pytest.mark.slow
def test_public_tests_cover_every_task(runs):
    tasks = {t["task"] for t in runs["public_stubs"]["tests"].values()}
    assert tasks == set(TASK_IDS)


@pytest.mark.slow
@pytest.mark.parametrize("mutant_id", [m.id for m in _mutants()])
def test_mutant_is_caught_only_by_its_task_and_named(runs, mutant_id):
    task = next(m.function for m in _mutants() if m.id == mutant_id)  # function == task id here
    # Another mutant may be named where the two agree (e.g. on a 1 x 1 mask); what
    # matters is that some failing test names this one.
    problems = harness.mutant_problems(runs["mutants"][mutant_id], mutant_id, task)
    assert not problems, problems


# ------------------------------------------------------------- the manifest's rules
# That stubs, reference, mutants and quiz agree is checked for every assignment by
# tests/test_assignments_consistent.py (grade validate's consistency checks).


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


if __name__ == "__main__":
    harness.child_main(_child)

"""`grade validate`: the instructor's proof that an assignment grades correctly.

Each claim is checked by grading real workspaces through the sandbox, with the
hidden tests (mode "submit") and with the public tests (mode "check"):

* every hidden and public test can be graded: it collects and names exactly one
  task of the manifest (a test of no task would count for nothing, unseen);
* the reference earns full marks (with the quiz key as its answers) and passes
  every public test; the public tests cover every code task;
* the untouched stubs earn zero and pass no public test;
* every catalogued mutant loses points on its own task only and is diagnosed as
  itself, and fails at least one public test of its task on its values, so that
  `grade check` never passes what the hidden tests fail;
* no hidden test passes for a placeholder: the reference's answers with their
  values made degenerate (zeros, ones, NaN, an input handed back) pass none of them,
  so a test whose input makes the answer degenerate carries no points on its own.
"""

from __future__ import annotations

import ast
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.compat import tomllib
from grader.core.manifest import Manifest
from grader.core.quiz import ANSWERS_FILE
from grader.core.records import PASSED, GradeResult
from grader.harness.catalogue import Mutant
from grader.harness.reference import load_reference
from grader.pipeline.jobs import GradingJob
from grader.pipeline.local_pool import LocalProcessExecutor

VALIDATE_JOBS = 1  # workspaces graded at once unless asked for more: one pool worker


HIDDEN, PUBLIC = "hidden", "public"
PUBLIC_SUFFIX = " (public tests)"  # a public-suite verdict's subject: "reference (public tests)"


@dataclass(frozen=True)
class Verdict:
    assignment_id: str
    subject: str  # "reference", "stubs", a mutant id, or "hidden tests"/"public tests"; + PUBLIC_SUFFIX
    task: str  # the mutant's task ("" for reference/stubs)
    ok: bool
    detail: str
    score: float
    max_points: float
    suite: str = HIDDEN  # which tests judged: HIDDEN (grade submit) or PUBLIC (grade check)


def reference_answers(assignment: Assignment) -> str:
    """answers.toml text holding the quiz key's answers."""
    key_path = assignment.quiz_key
    if not key_path.is_file():
        return ""
    answers = tomllib.loads(key_path.read_text(encoding="utf-8")).get("answers", {})
    lines = []
    for question, answer in answers.items():
        value = answer["value"] if isinstance(answer, dict) else answer
        lines.append(f"{question} = {value!r}" if not isinstance(value, str) else f'{question} = "{value}"')
    return "\n".join(lines) + "\n"


def defining_file(manifest: Manifest, reference_dir: Path, function: str) -> str:
    if manifest.is_launcher(function):  # a kernel mistake lives in the kernel file
        return manifest.contract.file
    for filename in manifest.files:
        tree = ast.parse((reference_dir / filename).read_text(encoding="utf-8"))
        if any(isinstance(n, ast.FunctionDef) and n.name == function for n in tree.body):
            return filename
    raise ValueError(f"no reference module defines {function}")


def reference_workspace(assignment: Assignment, target: Path, mutant: Mutant | list[Mutant] | None = None) -> Path:
    """The reference solution as a student workspace, with mutants (if any) swapped in."""
    manifest, reference_dir = assignment.manifest, assignment.reference
    target.mkdir(parents=True, exist_ok=True)
    for filename in manifest.files:
        (target / filename).write_text((reference_dir / filename).read_text(encoding="utf-8"))
    (target / ANSWERS_FILE).write_text(reference_answers(assignment))
    for one in [mutant] if isinstance(mutant, Mutant) else (mutant or []):
        filename = defining_file(manifest, reference_dir, one.function)
        if one.patch:
            (target / filename).write_text(patched(one, (target / filename).read_text(encoding="utf-8"), filename))
            continue
        with open(target / filename, "a", encoding="utf-8") as fh:
            fh.write(f"\n\n# --- mutant {one.id}\n{one.source()}\n"
                     f"{one.function} = {one.fn.__name__}\n")
    return target


def patched(mutant: Mutant, text: str, filename: str) -> str:
    """`text` with the mutant's patch applied; ValueError unless every old text is there exactly once."""
    for old, new in mutant.patch:
        found = text.count(old)
        if found != 1:
            raise ValueError(f"mutant {mutant.id}'s patch does not apply to the reference's {filename}: "
                             f"{old!r} is there {found} times, not once")
        text = text.replace(old, new)
    return text


def judge_reference(result: GradeResult) -> tuple[bool, str]:
    lost = [t for t in result.score.tasks if t.status not in ("pending",) and not t.bonus
            and t.earned < t.points]
    if lost:
        return False, "lost points on " + ", ".join(f"{t.task_id} ({t.earned:g}/{t.points:g})" for t in lost)
    return True, f"full marks ({result.score.total:g}/{result.score.max_points - result.score.pending_points:g} judged)"


def judge_stubs(result: GradeResult) -> tuple[bool, str]:
    if result.score.total > 0:
        earned = [t.task_id for t in result.score.tasks if t.earned > 0]
        return False, "stubs earn points on " + ", ".join(earned)
    return True, "0 points"


def judge_mutant(result: GradeResult, mutant: Mutant, task_id: str) -> tuple[bool, str]:
    problems = []
    own = next(t for t in result.score.tasks if t.task_id == task_id)
    if own.earned >= own.points:
        problems.append(f"not caught: {task_id} still earns full marks")
    # Bonus and timing tasks build on the graded functions (a GQA kernel, a backward
    # pass, a timed kernel): a broken forward may cost points there too, by design.
    others = [t for t in result.score.tasks if t.task_id != task_id and t.status != "pending"
              and not t.bonus and t.kind != "timing" and t.earned < t.points]
    if others:
        problems.append("also loses points on " + ", ".join(t.task_id for t in others))
    diagnosed = {(o.diagnosis or {}).get("id") for o in result.outcomes
                 if o.task == task_id and o.status == "failed"}
    if mutant.id not in diagnosed:
        named = ", ".join(sorted(d for d in diagnosed if d)) or "nothing"
        problems.append(f"diagnosed as {named}")
    if problems:
        return False, "; ".join(problems)
    failed = sum(o.status == "failed" for o in result.outcomes if o.task == task_id)
    return True, f"caught by {failed} test(s), diagnosed as itself; {own.earned:g}/{own.points:g}"


def _judged_by_values(outcome) -> bool:
    """A public test failed on what the code returned: a value compared (or refused as
    degenerate), not only a property message or a missing kernel launch."""
    return outcome.status == "failed" and bool(outcome.measured)


def judge_public_reference(result: GradeResult, manifest: Manifest) -> tuple[bool, str]:
    problems = []
    judged = [o for o in result.outcomes if o.status != "pending"]  # check's quiz line is pending
    failed = [o.name for o in judged if o.status != "passed"]
    if failed:
        problems.append("fails public tests: " + ", ".join(failed[:6]) + (" …" if len(failed) > 6 else ""))
    covered = {o.task for o in judged}
    uncovered = [t.id for t in manifest.tasks if t.kind == "code" and t.id not in covered]
    if uncovered:
        problems.append("no public test of " + ", ".join(uncovered))
    if problems:
        return False, "; ".join(problems)
    return True, f"passes all {len(judged)} public tests, which cover every code task"


def judge_public_stubs(result: GradeResult) -> tuple[bool, str]:
    passed = [o.name for o in result.outcomes if o.status == "passed"]
    if passed:
        return False, "the stubs pass public tests: " + ", ".join(passed)
    return True, f"fail all {sum(o.status == 'failed' for o in result.outcomes)} public tests"


def judge_public_mutant(result: GradeResult, task_id: str) -> tuple[bool, str]:
    """The mutant fails at least one public test of its own task on its values."""
    caught = [o for o in result.outcomes if o.task == task_id and _judged_by_values(o)]
    if caught:
        return True, f"fails {len(caught)} public test(s) of {task_id}, e.g. {caught[0].name}"
    other = [o.name for o in result.outcomes if o.task == task_id and o.status == "failed"]
    why = (f"only on a property or a launch check ({', '.join(other)})" if other else "none")
    return False, (f"passes the public tests of {task_id}: grade check gives full marks to code the "
                   f"hidden tests fail (public failures of {task_id}: {why}); add a public test that "
                   f"exercises what this mutant gets wrong")


DEGENERATE_SEED = 1  # the inputs the placeholders are tried on


def degenerate_verdict(assignment: Assignment) -> Verdict:
    """One verdict: the hidden tests that a placeholder submission passes (none, to hold).

    Run in this process, without a sandbox: the placeholders are the reference's own answers
    with their values replaced (grader.harness.runners.DegenerateRunner), one family at a time."""
    from grader.harness.degenerate import FAMILIES
    from grader.harness.reference import course_imports
    from grader.harness.runners import DegenerateRunner
    from grader.harness.suite import run_suite
    from grader.harness.testing import GradingContext

    manifest = assignment.manifest
    reference, _ = load_reference(assignment)
    cache: dict = {}
    passed: dict[str, list[str]] = {}
    for family in FAMILIES:
        runner = DegenerateRunner(reference, family, cache)
        context = GradingContext(runner=runner, manifest=manifest, reference=runner.cached_reference(),
                                 seed=DEGENERATE_SEED, device="cpu", hidden=True)
        with course_imports(assignment.course.root):
            outcomes, _ = run_suite(assignment.hidden_tests, context)
        for outcome in outcomes:
            if outcome.status == PASSED:
                passed.setdefault(outcome.name, []).append(family)
    if not passed:
        detail = f"no hidden test passes for a placeholder ({', '.join(FAMILIES.values())})"
    else:
        listed = "; ".join(f"{name} ({', '.join(FAMILIES[f] for f in families)})"
                           for name, families in sorted(passed.items()))
        detail = (f"{len(passed)} hidden test(s) pass for a placeholder, so a submission that computes nothing "
                  f"earns their points: {listed}. Their inputs make the answer degenerate: pair each with an "
                  f"input where only a real implementation is right, in the same test")
    return Verdict(manifest.id, "degenerate answers", "", not passed, detail, 0.0, manifest.max_points, HIDDEN)


def collection_verdicts(assignment: Assignment) -> list[Verdict]:
    """One verdict per suite: every test collects and names one task of the manifest."""
    from grader.harness.suite import collection_problems

    manifest = assignment.manifest
    verdicts = []
    for suite, folder in ((HIDDEN, assignment.hidden_tests), (PUBLIC, assignment.public_tests)):
        problems = collection_problems(folder, manifest)
        detail = ("; ".join(problems) if problems else
                  "every test collects and names one task of the manifest")
        verdicts.append(Verdict(manifest.id, f"{suite} tests", "", not problems, detail, 0.0,
                                manifest.max_points, suite))
    return verdicts


def validate(assignment: Assignment, jobs: int | None = None,
             progress: Callable[[Verdict], None] | None = None) -> list[Verdict]:
    """Grade the reference, the stubs and every mutant; one Verdict each (`jobs` at once,
    default VALIDATE_JOBS)."""
    manifest = assignment.manifest
    _, mutants = load_reference(assignment)
    verdicts: list[Verdict] = []
    for verdict in [*collection_verdicts(assignment), degenerate_verdict(assignment)]:
        verdicts.append(verdict)
        if progress:
            progress(verdict)
    with tempfile.TemporaryDirectory(prefix="grade-validate-") as temp:
        temp_dir = Path(temp)
        workspaces: list[tuple[str, Path, Mutant | None]] = [
            ("reference", reference_workspace(assignment, temp_dir / "reference"), None),
            ("stubs", assignment.folder, None),
        ]
        for mutant in mutants:
            workspace = reference_workspace(assignment, temp_dir / mutant.id, mutant)
            workspaces.append((mutant.id, workspace, mutant))
        # Every workspace twice: by the hidden tests (grade submit) and by the public ones (grade check).
        subjects = [(name, path, mutant, suite) for suite in (HIDDEN, PUBLIC)
                    for name, path, mutant in workspaces]
        executor = LocalProcessExecutor(VALIDATE_JOBS if jobs is None else jobs, assignment=assignment)
        try:
            # The subjects are the instructor's own code: no sandbox level is required to grade them.
            futures = [executor.submit(GradingJob(assignment, str(path), name, allow_weak_sandbox=True,
                                                  mode="submit" if suite == HIDDEN else "check"))
                       for name, path, _, suite in subjects]
            outcomes = []
            for (name, _, mutant, suite), future in zip(subjects, futures, strict=True):
                outcomes.append(future.result())
                verdict = _verdict(manifest, name, mutant, suite, outcomes[-1])
                verdicts.append(verdict)
                if progress:
                    progress(verdict)
        finally:
            executor.shutdown()
    return verdicts


def _verdict(manifest: Manifest, name: str, mutant: Mutant | None, suite: str, outcome) -> Verdict:
    subject = name if suite == HIDDEN else name + PUBLIC_SUFFIX
    task = manifest.task_for_function(mutant.function) if mutant else None
    task_id = task.id if task else ("?" if mutant else "")
    if outcome.error is not None:
        return Verdict(manifest.id, subject, task_id, False, f"could not grade: {outcome.error}",
                       0.0, manifest.max_points, suite)
    result = GradeResult.from_dict(outcome.result)
    if mutant is not None and task is None:
        ok, detail = False, "no task owns it"
    elif suite == HIDDEN:
        if mutant is None:
            ok, detail = (judge_reference if name == "reference" else judge_stubs)(result)
        else:
            ok, detail = judge_mutant(result, mutant, task_id)
    elif mutant is None:
        ok, detail = (judge_public_reference(result, manifest) if name == "reference"
                      else judge_public_stubs(result))
    else:
        ok, detail = judge_public_mutant(result, task_id)
    return Verdict(manifest.id, subject, task_id, ok, detail, result.score.total, result.score.max_points,
                   suite)

"""`grade validate`: the instructor's proof that an assignment grades correctly.

First the consistency checks (grader.authoring.consistency): what the files say agrees, in seconds,
before anything is graded. Then each claim is checked by grading real workspaces through the
sandbox, with the hidden tests (mode "submit") and with the public tests (mode "check"):

* the reference earns full marks (with the quiz key as its answers) and passes every public test;
* the untouched stubs earn zero and pass no public test;
* every catalogued mutant loses points on its own task only and is diagnosed as itself, and fails at
  least one public test of its task on its values, so that `grade check` never passes what the hidden
  tests fail;
* no hidden test passes for a placeholder: the reference's answers with their values made degenerate
  (zeros, ones, NaN, an input handed back) pass none of them;
* no hidden test's verdict depends on the random draw: the reference and every mutant are graded by
  the hidden tests under several seeds (`seeds`), and a test that passes under one and fails under
  another is named.

The gradings run side by side on the project's pool (grader.pipeline.local_pool, fed by
grader.pipeline.dispatch), each in a worker forked from a template worker, in milliseconds rather than
started afresh (a new interpreter importing torch per grading): under bubblewrap where its workers fork
from one (grader.sandbox.namespaces), else at the no-namespace level (the code is the instructor's own).
A grading whose fingerprint is unchanged since the last run is read back instead
(grader.authoring.validate_cache). `tasks` and `mutant_ids` narrow the run to
those mutants (the reference and the stubs are always graded, mostly from the cache).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from grader.authoring.consistency import consistency_checks
from grader.authoring.validate_cache import Fingerprints, ValidateCache
from grader.authoring.validated import EVERYTHING, record_run
from grader.authoring.workspaces import defining_file, patched, reference_answers, reference_workspace
from grader.core.assignment import Assignment
from grader.core.errors import GraderError, UnknownTask
from grader.core.manifest import Manifest
from grader.core.records import PASSED, GradeResult
from grader.harness.catalogue import Mutant
from grader.harness.reference import load_reference
from grader.pipeline.discovery import Entry
from grader.pipeline.dispatch import Dispatcher
from grader.pipeline.grading import open_submission
from grader.pipeline.jobs import GradingJob, JobResult
from grader.pipeline.local_pool import LocalProcessExecutor

__all__ = ["Verdict", "ValidateOptions", "validate", "reference_answers", "reference_workspace", "defining_file",
           "patched", "PUBLIC_SUFFIX", "DEFAULT_SEEDS"]

HIDDEN, PUBLIC, STATIC = "hidden", "public", "static"
PUBLIC_SUFFIX = " (public tests)"  # a public-suite verdict's subject: "reference (public tests)"
DEFAULT_SEEDS = 2  # hidden gradings of the reference and of each mutant, one per seed
FIRST_SEED = 20261214  # the seeds are FIRST_SEED, FIRST_SEED + 1, ...: fixed, so a second run reuses gradings
DEGENERATE_SEED = 1  # the inputs the placeholders are tried on


def default_jobs() -> int:
    """Gradings at once: this machine's cores (each grading is a pool worker and its sandbox worker, which
    take turns)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ValidateOptions:
    """How to validate: `jobs` gradings at once (default: the cores), `seeds` hidden gradings of the
    reference and each mutant, only the mutants of `tasks` / `mutant_ids` (default: all), with the cache
    (`use_cache`), or the consistency checks alone (`checks_only`)."""

    jobs: int | None = None
    seeds: int = DEFAULT_SEEDS
    tasks: tuple[str, ...] = ()
    mutant_ids: tuple[str, ...] = ()
    use_cache: bool = True
    checks_only: bool = False

    @property
    def narrowed(self) -> bool:
        return bool(self.tasks or self.mutant_ids)

    @property
    def covered(self) -> str:
        """What a run with these options covers, in words (grader.authoring.validated.EVERYTHING: all of it)."""
        if self.checks_only:
            return "the consistency checks only"
        parts = [f"{what}: {', '.join(items)}" for what, items in (("tasks", self.tasks), ("mutants", self.mutant_ids))
                 if items]
        return "only " + "; ".join(parts) if parts else EVERYTHING


@dataclass(frozen=True)
class Verdict:
    assignment_id: str
    subject: str  # "reference", "stubs", a mutant id, a consistency check's name; + PUBLIC_SUFFIX
    task: str  # the mutant's task ("" for the others)
    ok: bool
    detail: str
    score: float
    max_points: float
    suite: str = HIDDEN  # which tests judged: HIDDEN (grade submit), PUBLIC (grade check), STATIC (none ran)
    seeds: tuple[int, ...] = ()  # the seeds it was graded under
    seconds: float = 0.0  # grading time (0 for a verdict read from the cache)
    cached: bool = False  # every grading behind it was read back from the cache
    seed_dependent: tuple[str, ...] = ()  # hidden tests whose verdict flipped between seeds here


# ------------------------------------------------------------------------------ judging one result
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
    # Bonus and timing tasks build on the graded functions (a GQA kernel, a backward pass, a timed
    # kernel): a broken forward may cost points there too, by design (consistency.tolerates_others).
    others = [t for t in result.score.tasks if t.task_id != task_id and t.status != "pending"
              and not t.bonus and t.kind != "timing" and t.earned < t.points]
    if others:
        names = ", ".join(t.task_id for t in others)
        problems.append(f"also loses points on {names}: the tests of {names} reach {mutant.function}, most often "
                        f"through a reference function that calls it (the consistency check 'reference calls' names "
                        f"it): have both call a private helper")
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


def judge_public_mutant(result: GradeResult, task_id: str, hidden_caught: bool = True) -> tuple[bool, str]:
    """The mutant fails at least one public test of its own task on its values."""
    caught = [o for o in result.outcomes if o.task == task_id and _judged_by_values(o)]
    if caught:
        return True, f"fails {len(caught)} public test(s) of {task_id}, e.g. {caught[0].name}"
    other = [o.name for o in result.outcomes if o.task == task_id and o.status == "failed"]
    why = (f"only on a property or a launch check ({', '.join(other)})" if other else "none")
    if not hidden_caught:
        return False, (f"passes the public tests of {task_id} (public failures: {why}), and the hidden tests do not "
                       f"catch it either: if it computes what the reference computes on every input, it is no "
                       f"mistake (remove it); else add a hidden test and a public test on an input where it is wrong")
    return False, (f"passes the public tests of {task_id}: grade check gives full marks to code the "
                   f"hidden tests fail (public failures of {task_id}: {why}); add a public test that "
                   f"exercises what this mutant gets wrong")


# ------------------------------------------------------------------------------ placeholders
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


# ------------------------------------------------------------------------------ the plan
@dataclass
class Grading:
    """One grading to do (or to read back): a workspace, by one suite, under one seed."""

    label: str  # a name the pool knows it by
    subject: str  # "reference", "stubs" or a mutant's id
    mutant: Mutant | None
    suite: str
    seed: int
    workspace: Path
    key: str = ""
    result: dict | None = None
    error: str | None = None
    seconds: float = 0.0
    cached: bool = False

    @property
    def done(self) -> bool:
        return self.result is not None or self.error is not None


@dataclass
class Group:
    """The gradings behind one verdict: a subject by one suite (under each seed for the hidden tests)."""

    subject: str
    mutant: Mutant | None
    suite: str
    gradings: list[Grading] = field(default_factory=list)
    reported: bool = False
    problem: str = ""  # why it cannot be graded at all


def seeds_of(count: int) -> tuple[int, ...]:
    return tuple(FIRST_SEED + i for i in range(max(1, count)))


def chosen_mutants(mutants: list[Mutant], manifest: Manifest, options: ValidateOptions) -> list[Mutant]:
    """The mutants `options` asks for (all by default); UnknownTask for a task or mutant that does not exist."""
    unknown_tasks = [t for t in options.tasks if not manifest.has_task(t)]
    if unknown_tasks:
        raise UnknownTask(f"{manifest.id} has no task {', '.join(unknown_tasks)} "
                          f"(tasks: {', '.join(t.id for t in manifest.tasks)})")
    ids = {m.id for m in mutants}
    unknown = [m for m in options.mutant_ids if m not in ids]
    if unknown:
        raise UnknownTask(f"{manifest.id}'s catalogue has no mutant {', '.join(unknown)} (mutants: "
                          f"{', '.join(sorted(ids))})")
    if not options.narrowed:
        return list(mutants)

    def wanted(mutant: Mutant) -> bool:
        task = manifest.task_for_function(mutant.function)
        return mutant.id in options.mutant_ids or (task is not None and task.id in options.tasks)

    return [m for m in mutants if wanted(m)]


def plan(assignment: Assignment, mutants: list[Mutant], options: ValidateOptions, temp: Path,
         fingerprints: Fingerprints) -> list[Group]:
    """Every grading to do, grouped by the verdict it makes, with its workspace built and its fingerprint."""
    seeds = seeds_of(options.seeds)
    subjects: list[tuple[str, Path, Mutant | None]] = [
        ("reference", reference_workspace(assignment, temp / "reference"), None),
        ("stubs", assignment.folder, None)]
    groups: list[Group] = []
    for mutant in chosen_mutants(mutants, assignment.manifest, options):
        try:
            subjects.append((mutant.id, reference_workspace(assignment, temp / "mutants" / mutant.id, mutant), mutant))
        except (OSError, ValueError, SyntaxError) as exc:  # named by the consistency check "mutants" too
            groups.append(Group(mutant.id, mutant, HIDDEN, problem=f"its workspace cannot be built: {exc}"))
    count = 0
    for subject, workspace, mutant in subjects:
        files = open_submission(assignment, workspace, student="validate").sha256
        for suite in (HIDDEN, PUBLIC):
            group = Group(subject, mutant, suite)
            for seed in (seeds if suite == HIDDEN and subject != "stubs" else seeds[:1]):
                group.gradings.append(Grading(f"g{count}", subject, mutant, suite, seed, workspace,
                                              fingerprints.grading(suite, seed, files, mutant)))
                count += 1
            groups.append(group)
    return groups


# ------------------------------------------------------------------------------ judging a group
def _statuses(result: dict) -> dict[str, str]:
    return {o["name"]: o["status"] for o in result.get("outcomes", []) if o["status"] in ("passed", "failed")}


def seed_flips(gradings: list[Grading]) -> dict[str, dict[str, list[int]]]:
    """Hidden tests whose verdict differs between the seeds: test → status → the seeds it had it under."""
    by_test: dict[str, dict[str, list[int]]] = {}
    for grading in gradings:
        for name, status in _statuses(grading.result or {}).items():
            by_test.setdefault(name, {}).setdefault(status, []).append(grading.seed)
    return {name: seen for name, seen in by_test.items() if len(seen) > 1}


def describe_flips(flips: dict[str, dict[str, list[int]]]) -> str:
    """'test_x (passed under seed 1; failed under seed 2)' for each test."""
    described = []
    for name, seen in sorted(flips.items()):
        under = "; ".join(f"{status} under seed {', '.join(map(str, seeds))}" for status, seeds in sorted(seen.items()))
        described.append(f"{name} ({under})")
    return "; ".join(described)


def judge_group(group: Group, manifest: Manifest, hidden_caught: dict[str, bool]) -> Verdict:
    subject = group.subject if group.suite == HIDDEN else group.subject + PUBLIC_SUFFIX
    mutant = group.mutant
    task = manifest.task_for_function(mutant.function) if mutant else None
    task_id = task.id if task else ("?" if mutant else "")
    seeds = tuple(g.seed for g in group.gradings)
    seconds = round(sum(g.seconds for g in group.gradings), 2)
    cached = all(g.cached for g in group.gradings)
    common = dict(suite=group.suite, seeds=seeds, seconds=seconds, cached=cached)
    if group.problem:
        return Verdict(manifest.id, subject, task_id, False, group.problem, 0.0, manifest.max_points, **common)
    failed = [g for g in group.gradings if g.error is not None]
    if failed:
        return Verdict(manifest.id, subject, task_id, False, f"could not grade: {failed[0].error}",
                       0.0, manifest.max_points, **common)
    results = [GradeResult.from_dict(g.result) for g in group.gradings]
    if mutant is not None and task is None:
        return Verdict(manifest.id, subject, task_id, False, "no task owns it", 0.0, manifest.max_points, **common)
    judged = []
    for result in results:
        if group.suite == HIDDEN:
            if mutant is None:
                judged.append((judge_reference if group.subject == "reference" else judge_stubs)(result))
            else:
                judged.append(judge_mutant(result, mutant, task_id))
        elif mutant is None:
            judged.append(judge_public_reference(result, manifest) if group.subject == "reference"
                          else judge_public_stubs(result))
        else:
            judged.append(judge_public_mutant(result, task_id, hidden_caught.get(mutant.id, True)))
    ok = all(one for one, _ in judged)
    if len(judged) == 1 or len({detail for _, detail in judged}) == 1:
        detail = judged[0][1]
    else:
        detail = "; ".join(f"seed {seed}: {text}" for seed, (_, text) in zip(seeds, judged, strict=True))
    flips = seed_flips(group.gradings) if group.suite == HIDDEN and len(group.gradings) > 1 else {}
    if flips:
        detail += f"; the verdict of {len(flips)} hidden test(s) depends on the draw: {describe_flips(flips)}"
    return Verdict(manifest.id, subject, task_id, ok, detail, min(r.score.total for r in results),
                   results[0].score.max_points, seed_dependent=tuple(sorted(flips)), **common)


def caught(group: Group, manifest: Manifest) -> bool:
    """Whether the hidden tests took points off the mutant's own task under some seed (True when there is
    nothing to read: a grading that failed says so itself)."""
    task = manifest.task_for_function(group.mutant.function) if group.mutant else None
    results = [g.result for g in group.gradings if g.result is not None]
    if task is None or not results:
        return True
    return any(t["task_id"] == task.id and t["earned"] < t["points"]
               for result in results for t in result["score"]["tasks"])


def seeds_verdict(manifest: Manifest, groups: list[Group], seeds: tuple[int, ...]) -> Verdict:
    """Every hidden test whose verdict flipped between seeds, on any workspace."""
    flipped: dict[str, list[str]] = {}
    for group in groups:
        if group.suite == HIDDEN and all(g.result for g in group.gradings):
            for name in seed_flips(group.gradings):
                flipped.setdefault(name, []).append(group.subject)
    if len(seeds) < 2:
        detail = "graded under one seed: run with --seeds 2 or more to find tests that depend on the draw"
    elif not flipped:
        detail = f"no hidden test's verdict depends on the draw (seeds {', '.join(map(str, seeds))})"
    else:
        listed = "; ".join(f"{name} (for {', '.join(subjects)})" for name, subjects in sorted(flipped.items()))
        detail = (f"{len(flipped)} hidden test(s) pass under one seed and fail under another, so a grade depends on "
                  f"the inputs drawn: {listed}. Make each test's verdict hold for every draw (an input that shows "
                  f"the mistake every time)")
    return Verdict(manifest.id, "seeds", "", not flipped, detail, 0.0, manifest.max_points, HIDDEN, seeds=seeds,
                   seed_dependent=tuple(sorted(flipped)))


# ------------------------------------------------------------------------------ running the gradings
class _ValidateJobs:
    """The dispatcher's intake: a planned grading's workspace and job."""

    def __init__(self, assignment: Assignment, gradings: dict[str, Grading]):
        self.assignment = assignment
        self.gradings = gradings

    def load(self, entry: Entry):
        return open_submission(self.assignment, entry.path, student=entry.student)

    def job(self, entry: Entry, submission) -> GradingJob:
        grading = self.gradings[entry.student]
        # The subjects are the instructor's own code: no sandbox level is required to grade them.
        return GradingJob(self.assignment, str(grading.workspace), entry.student, seed=grading.seed,
                          allow_weak_sandbox=True, mode="submit" if grading.suite == HIDDEN else "check")


class _ValidateOutcomes:
    """The dispatcher's recorder: each finished grading goes to `finished`."""

    def __init__(self, gradings: dict[str, Grading], finished: Callable[[Grading], None]):
        self.gradings = gradings
        self.finished = finished

    def error(self, entry: Entry, sha256: str, error: str) -> None:
        grading = self.gradings[entry.student]
        grading.error = error
        self.finished(grading)

    def outcome(self, entry: Entry, submission, outcome: JobResult) -> None:
        grading = self.gradings[entry.student]
        grading.result, grading.error = outcome.result, outcome.error
        grading.seconds = round(outcome.worker_s, 2)
        self.finished(grading)


def validating(assignment: Assignment) -> Assignment:
    """The assignment as validate grades it: every worker forked from a template worker (see the module
    docstring), at the host's own level where bubblewrap's workers fork from one, else at the
    no-namespace level."""
    from grader.sandbox.template import Zygote

    switches = replace(assignment.switches, no_template=False)
    if Zygote.kind_for(False, assignment.settings.sandbox.uid_range, switches) is None:
        switches = replace(switches, no_bubblewrap=True)
    return replace(assignment, switches=switches)


def run_gradings(assignment: Assignment, todo: list[Grading], jobs: int,
                 finished: Callable[[Grading], None]) -> None:
    """Grade `todo` on the local pool, `jobs` at once, calling `finished` as each one finishes. Stopped
    (Ctrl-C or SIGTERM: grader.cli stops the command), it ends the pool's workers at once, and their
    sandboxes with them, before the stop goes on."""
    if not todo:
        return
    gradings = {g.label: g for g in todo}
    executor = LocalProcessExecutor(min(jobs, len(todo)), assignment=assignment)
    dispatcher = Dispatcher(executor, window=2 * executor.slots, intake=_ValidateJobs(assignment, gradings),
                            recorder=_ValidateOutcomes(gradings, finished))
    try:
        dispatcher.run(deque(Entry(g.label, g.workspace) for g in todo))
    except BaseException:  # stopped (Ctrl-C, SIGTERM): end the workers and their sandboxes now
        executor.shutdown(cancel=True)
        raise
    executor.shutdown()


# ------------------------------------------------------------------------------ validate
def validate(assignment: Assignment, jobs: int | None = None, progress: Callable[[Verdict], None] | None = None,
             options: ValidateOptions | None = None, announce: Callable[[str], None] | None = None) -> list[Verdict]:
    """Consistency checks, then the reference, the stubs and every mutant graded (see the module docstring):
    one Verdict each, handed to `progress` as it is made; `announce` hears what is about to run. The run's
    result and what it covered are recorded (grader.authoring.validated), which release and autograder read."""
    options = options or ValidateOptions(jobs=jobs)
    if jobs is not None:
        options = replace(options, jobs=jobs)
    tell = progress or (lambda _verdict: None)
    say = announce or (lambda _text: None)
    manifest = assignment.manifest
    verdicts: list[Verdict] = []

    def emit(verdict: Verdict) -> None:
        verdicts.append(verdict)
        tell(verdict)

    started = time.perf_counter()
    try:
        _, mutants = load_reference(assignment)
        broken = ""
    except Exception as exc:  # the reference or the catalogue does not import: nothing can be graded
        mutants, broken = [], f"{type(exc).__name__}: {exc}"
        emit(Verdict(manifest.id, "reference", "", False, f"reference/{manifest.id}/ cannot be imported ({broken}), so "
                     f"nothing was graded", 0.0, manifest.max_points))
    chosen_mutants(mutants, manifest, options)  # an unknown --task or --mutant is refused before any work
    for check in consistency_checks(assignment, mutants):
        emit(Verdict(manifest.id, check.name, "", check.ok, check.detail, 0.0, manifest.max_points, check.suite))
    say(f"consistency checks: {time.perf_counter() - started:.1f} s")
    if options.checks_only or broken:
        record_run(assignment, verdicts, options.covered)
        return verdicts
    cache = ValidateCache(assignment, enabled=options.use_cache)
    fingerprints = Fingerprints(assignment, mutants)
    emit(_cached_degenerate(assignment, cache, fingerprints))
    with tempfile.TemporaryDirectory(prefix="grade-validate-") as temp:
        groups = plan(assignment, mutants, options, Path(temp), fingerprints)
        gradings = [g for group in groups for g in group.gradings]
        for grading in gradings:
            entry = cache.get(grading.key)
            if entry is not None:
                grading.result, grading.seconds, grading.cached = entry["result"], 0.0, True
        todo = [g for g in gradings if not g.done]
        jobs_used = min(options.jobs or default_jobs(), max(1, len(todo)))
        say(f"grading the reference, the stubs and every mutant{' asked for' if options.narrowed else ''}: "
            f"{len(gradings)} gradings, {len(gradings) - len(todo)} from the cache, {len(todo)} to grade "
            f"({jobs_used} at once; hidden tests under {options.seeds} seed(s))")
        hidden_caught: dict[str, bool] = {}

        def report_ready() -> None:
            for group in groups:
                if group.reported or not all(g.done for g in group.gradings):
                    continue
                if group.suite == PUBLIC and group.mutant is not None and group.mutant.id not in hidden_caught:
                    hidden = next(g for g in groups if g.subject == group.subject and g.suite == HIDDEN)
                    if not all(g.done for g in hidden.gradings):
                        continue  # judged after the hidden verdict, whose result its advice reads
                group.reported = True
                if group.suite == HIDDEN and group.mutant is not None:
                    hidden_caught[group.subject] = caught(group, manifest)
                emit(judge_group(group, manifest, hidden_caught))

        def finished(grading: Grading) -> None:
            if grading.result is not None:
                cache.put(grading.key, {"subject": grading.subject, "suite": grading.suite, "seed": grading.seed,
                                        "result": grading.result})
            report_ready()

        report_ready()
        run_gradings(validating(assignment), todo, jobs_used, finished)
        report_ready()
    emit(seeds_verdict(manifest, groups, seeds_of(options.seeds)))
    if not options.narrowed:
        cache.prune()
    record_run(assignment, verdicts, options.covered)
    return verdicts


def _cached_degenerate(assignment: Assignment, cache: ValidateCache, fingerprints: Fingerprints) -> Verdict:
    key = fingerprints.degenerate(DEGENERATE_SEED)
    entry = cache.get(key)
    if entry is not None:
        saved = entry["verdict"]
        return replace(Verdict(**{**saved, "seeds": tuple(saved["seeds"]),
                                  "seed_dependent": tuple(saved["seed_dependent"])}), cached=True, seconds=0.0)
    started = time.perf_counter()
    try:
        verdict = degenerate_verdict(assignment)
    except GraderError as exc:
        return Verdict(assignment.id, "degenerate answers", "", False, f"could not run: {exc}", 0.0,
                       assignment.manifest.max_points)
    verdict = replace(verdict, seconds=round(time.perf_counter() - started, 2))
    cache.put(key, {"verdict": asdict(verdict)})
    return verdict

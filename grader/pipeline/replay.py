"""A recorded grading run again, exactly as it was run, and what came out differently: the answer to
an appeal ("was my grade right?") and to "what does the changed hidden test do to this student?".

What the gradebook record holds is what the replay is given: the files (their sha256 checked
against the record's), the input seed, the mode, the dates the late policy held them to, the
device (CPU or GPU) and where kernels were timed, and the sandbox level (layers the record did
not have are switched off here, so the replay runs at that level, or a weaker one it says so).
It grades through the one grading path (`record.grade_and_record`, the sinks the caller gives:
none by default, so nothing is written) and compares test by test: verdict (status and kind)
and points, then the total.

What can explain a difference is said beside it: versions (grader, torch, triton, Python, GPU)
other than the recorded ones, a grading fingerprint that changed since (the manifest, hidden
tests, reference, catalogue or quiz key), a different sandbox level, and timing, which is
measured again. Overrides and extensions granted since are not part of a grading (they apply
when a grade is read: `grade report`), so the totals compared are the graded ones; beside them,
for the grading that counts, the grade as it stands (extension and overrides applied) and what the
replay would stand at under the same decisions, with each override named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

import torch

from grader.core.assignment import Assignment
from grader.core.compat import parse_iso
from grader.core.due import DueDate
from grader.core.errors import GradebookError, GraderError
from grader.core.records import GradeResult, Score, TestOutcome
from grader.core.scoring import test_scores
from grader.intake.submission import Submission
from grader.pipeline.grading import GradeRequest
from grader.pipeline.record import GradebookRow, HtmlReport, Sink, grade_and_record
from grader.render.standing import Standing, standing_for, standing_of
from grader.sandbox.isolation import SandboxSwitches
from grader.storage.gradebook import Gradebook, SubmissionRecord

SWITCHABLE_LAYERS = ("uid", "landlock", "seccomp")  # what SandboxSwitches can turn off besides bubblewrap
EXPLAINING_VERSIONS = ("grader", "torch", "triton", "python", "gpu", "cuda", "driver")


@dataclass(frozen=True)
class TestChange:
    """One test whose verdict or points differ (None: the test did not exist in that run)."""

    __test__ = False  # not a pytest test class

    name: str
    task: str | None
    recorded: str | None  # "passed", "failed (wrong)", ...
    replayed: str | None
    recorded_points: float | None
    replayed_points: float | None
    timed: bool = False  # a timing test: measured again, so its points may move from run to run


@dataclass(frozen=True)
class Replay:
    """A recorded grading and its replay, compared."""

    record: SubmissionRecord
    result: GradeResult  # the replay's
    tests: tuple[TestChange, ...]
    versions: dict[str, tuple[str | None, str | None]]  # name → (recorded, now), only those that differ
    fingerprint_changed: bool  # what grades the assignment changed since (or the record predates fingerprints)
    recorded_level: str
    said: tuple[str, ...] = ()  # what the sinks said (a new record, a report), when any were given
    stands: Standing | None = None  # the recorded grading as it stands (None: it is not the one that counts)
    replay_stands: Standing | None = None  # the replay under the same extension and overrides

    @property
    def recorded_total(self) -> float:
        return self.record.result.score.total

    @property
    def replayed_total(self) -> float:
        return self.result.score.total

    @property
    def identical(self) -> bool:
        return not self.tests and self.recorded_total == self.replayed_total

    @property
    def level_changed(self) -> bool:
        return self.result.isolation_level != self.recorded_level


def choose_record(book: Gradebook, assignment_id: str, student: str, files: str | None = None) -> SubmissionRecord:
    """The student's latest graded submission, or the one whose files' sha256 starts with `files`."""
    records = book.submissions(assignment_id, student)
    if not records:
        raise GradebookError(f"{student} has no graded submission of {assignment_id} in {book.path}")
    if files is None:
        return records[-1]
    chosen = [r for r in records if r.sha256.startswith(files.lower())]
    if len(chosen) != 1:
        known = ", ".join(r.sha256[:12] for r in records)
        raise GradebookError(f"{'no' if not chosen else 'more than one'} graded submission of {student} in "
                             f"{assignment_id} has files {files!r} (theirs: {known})")
    return chosen[0]


def stored_submission(book: Gradebook, record: SubmissionRecord, module_files: tuple[str, ...]) -> Submission:
    """The files the record graded, from the gradebook, checked against the record's sha256."""
    files = book.files(record.id)
    missing = tuple(name for name in module_files if name not in files)
    submission = Submission(files=files, source=f"the gradebook's copy of files {record.sha256[:12]}",
                            form=record.result.submission_form, student=record.student_id,
                            submitted_at=parse_iso(record.submitted_at) if record.submitted_at else None,
                            notes=(f"missing file(s): {', '.join(missing)}",) if missing else (), missing=missing)
    if submission.sha256 != record.sha256:
        raise GradebookError(f"the stored files of {record.student_id}'s submission {record.sha256[:12]} do not "
                             f"hash to what was recorded ({submission.sha256[:12]}): the gradebook was changed")
    return submission


def recorded_due(score: Score) -> DueDate:
    """The dates the recorded grading held the submission to (its deadline and extension)."""
    if not score.due_at:
        return DueDate(deadline=None)
    extension = timedelta(seconds=score.extension_s) if score.extension_s else None
    due = parse_iso(score.due_at)
    return DueDate(deadline=due - extension if extension else due, extension=extension,
                   extension_from="the recorded grading" if extension else "")


def recorded_switches(level: str, switches: SandboxSwitches) -> SandboxSwitches:
    """`switches` that also turn off every layer the recorded `level` did not have (switches only weaken)."""
    layers = set(level.split("+"))
    return replace(switches, no_bubblewrap=switches.no_bubblewrap or "bubblewrap" not in layers,
                   without=switches.without | {name for name in SWITCHABLE_LAYERS if name not in layers})


def _timing_device(result: GradeResult) -> str:
    """Where the recorded grading timed kernels: 'cpu' (demonstrations), 'cuda', or 'auto' (not at all)."""
    timings = [o.detail["timing"] for o in result.outcomes if isinstance(o.detail.get("timing"), dict)]
    if any(t.get("cpu_timed") for t in timings):
        return "cpu"
    return "cuda" if timings else "auto"


def replay_request(record: SubmissionRecord, protected: tuple[str, ...] = (),
                   allow_weak_sandbox: bool = False) -> GradeRequest:
    """The request that grades the record's files as they were graded."""
    result = record.result
    on_gpu = bool(result.versions.get("gpu"))
    if on_gpu and not torch.cuda.is_available():
        raise GraderError(f"{record.student_id}'s grading ran on a GPU ({result.versions['gpu']}) and there is none "
                          f"here: replay it on a machine with one")
    return GradeRequest(mode=result.mode, seed=result.seed, use_gpu=on_gpu, timing_device=_timing_device(result),
                        allow_weak_sandbox=allow_weak_sandbox or result.sandbox_override, protected=protected,
                        due=recorded_due(result.score))


def _verdict(outcome: TestOutcome) -> str:
    return f"{outcome.status} ({outcome.kind})" if outcome.kind else str(outcome.status)


def _points(result: GradeResult) -> dict[str, float]:
    scores = result.score.tests or test_scores(result.score.tasks, result.outcomes)
    return {o.name: t.score for o, t in zip(result.outcomes, scores, strict=True)}


def compare_tests(recorded: GradeResult, replayed: GradeResult) -> tuple[TestChange, ...]:
    """Every test whose verdict (status and kind) or points differ, or that only one run has, in the
    recorded run's order, then the new ones."""
    before, after = {o.name: o for o in recorded.outcomes}, {o.name: o for o in replayed.outcomes}
    points_before, points_after = _points(recorded), _points(replayed)
    changes = []
    for name in [*before, *(n for n in after if n not in before)]:
        old, new = before.get(name), after.get(name)
        old_verdict = _verdict(old) if old else None
        new_verdict = _verdict(new) if new else None
        old_points, new_points = points_before.get(name), points_after.get(name)
        if old_verdict == new_verdict and old_points == new_points:
            continue
        either = old or new
        changes.append(TestChange(name=name, task=either.task, recorded=old_verdict, replayed=new_verdict,
                                  recorded_points=old_points, replayed_points=new_points,
                                  timed=bool(either.detail.get("timing") or (new and new.detail.get("timing")))))
    return tuple(changes)


def version_changes(recorded: dict, now: dict) -> dict[str, tuple[str | None, str | None]]:
    """The versions (grader, torch, triton, Python, GPU...) that differ between two runs."""
    names = [n for n in EXPLAINING_VERSIONS if n in recorded or n in now]
    names += sorted(n for n in {*recorded, *now} if n not in names)
    return {n: (recorded.get(n), now.get(n)) for n in names if recorded.get(n) != now.get(n)}


def recording_sinks(assignment: Assignment, book: Gradebook, student: str) -> list[Sink]:
    """Where `grade replay --record` puts a replay: the student's report at its usual place, and a new
    grading row in `book` saying it was replayed."""
    course = assignment.course
    return [HtmlReport(course.report_path(student, assignment.id), course.templates_dir),
            GradebookRow(book, "replayed (grade replay)")]


def replay(assignment: Assignment, book: Gradebook, student: str, *, files: str | None = None,
           sinks: Sequence[Sink] = (), protected: tuple[str, ...] = (), allow_weak_sandbox: bool = False,
           progress: Callable[[str], None] | None = None) -> Replay:
    """Grade a recorded submission again as it was graded and compare (see the module docstring).

    `files`: a sha256 prefix of the submission to replay (default: the student's latest). `sinks`:
    where the replay's result goes (grader.pipeline.record, e.g. `recording_sinks`; none: nothing is
    written). The gradebook's path and the student's report are always kept from the worker, with
    `protected`."""
    record = choose_record(book, assignment.id, student, files)
    submission = stored_submission(book, record, assignment.manifest.files)
    level = record.result.isolation_level
    at_level = replace(assignment, switches=recorded_switches(level, assignment.switches))
    report = assignment.course.report_path(student, assignment.id)
    request = replay_request(record, (str(book.path), str(report), *protected), allow_weak_sandbox)
    stands = standing_for(assignment.manifest, book, student)
    if stands is not None and stands.record.sha256 != record.sha256:
        stands = None  # an earlier submission: no decision applies to it
    result, said = grade_and_record(at_level, submission, request, sinks, progress)
    replay_stands = (standing_of(assignment.manifest, replace(record, result=result), stands.extension,
                                 stands.overrides) if stands is not None else None)
    return Replay(record=record, result=result, tests=compare_tests(record.result, result),
                  versions=version_changes(record.result.versions, result.versions),
                  fingerprint_changed=record.fingerprint != result.fingerprint,
                  recorded_level=level, said=tuple(said), stands=stands, replay_stands=replay_stands)

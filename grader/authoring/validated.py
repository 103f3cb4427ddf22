"""What the last `grade validate` of an assignment found, and whether it still speaks for the files.

Every run of validate records its result here, keyed by the fingerprint of what it validated: every file
of `assignments/<id>/` (stubs, public tests, handout, quiz, manifest), of `reference/<id>/` (reference,
hidden tests, catalogue, quiz key) and, for an assignment with kernels, `course_kernels/`, with the
grader's version. What a run covered is kept with it: all of it, only some tasks or mutants, or only the
consistency checks. `grade release` and `grade autograder gradescope` ask `shipping_check` before they
ship: an assignment whose last complete validate failed, or whose files changed since it passed, is
refused (ValidateRequired), unless forced, and then the line they print says what ships unvalidated.

The record is one JSON file per assignment under `.grade/validated/` (the validate cache's folder is
pruned, this one is not), written whole.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime

from grader import __version__
from grader.core.assignment import Assignment
from grader.core.compat import UTC
from grader.core.errors import ValidateRequired
from grader.core.files import tree_digest, tree_files, write_atomic

RECORD_SCHEME = "v1"
EVERYTHING = "everything"  # a run's `covered` when nothing was narrowed
FAILED_SHOWN = 6  # failed subjects named in a refusal (the rest counted)


def validated_fingerprint(assignment: Assignment) -> str:
    """sha256 (hex) of the files a validate run judges (see the module docstring) and the grader's version."""
    course = assignment.course
    files = {}
    for folder in (assignment.folder, assignment.reference):
        files.update({name: path for name, path in tree_files(folder, course.root).items()
                      if not any(part.startswith(".") for part in name.split("/"))})
    manifest = assignment.manifest
    if manifest.contract is not None or any(task.kind == "timing" for task in manifest.tasks):
        files.update(tree_files(course.kernels_dir, course.root))
    return tree_digest(files, f"grader {__version__}\0validated {RECORD_SCHEME}\n")


@dataclass(frozen=True)
class ValidateRun:
    """One validate run: when, of which files (`fingerprint`), what it covered and what failed."""

    fingerprint: str
    at: str
    covered: str  # EVERYTHING, or what was left out: "consistency checks only", "tasks: a, b", ...
    ok: bool
    failed: tuple[str, ...]  # the subjects whose verdict failed
    verdicts: int

    @property
    def complete(self) -> bool:
        return self.covered == EVERYTHING


def _path(assignment: Assignment):
    return assignment.course.state_dir / "validated" / f"{assignment.id}.json"


def record_run(assignment: Assignment, verdicts: list, covered: str) -> ValidateRun:
    """Record a finished run's verdicts (grader.authoring.validate.Verdict: `subject`, `ok`); the last
    complete run is kept beside the last run of any kind."""
    failed = tuple(dict.fromkeys(v.subject for v in verdicts if not v.ok))
    run = ValidateRun(validated_fingerprint(assignment), datetime.now(UTC).isoformat(timespec="seconds"),
                      covered, not failed, failed, len(verdicts))
    saved = _read(assignment)
    saved["last"] = asdict(run)
    if run.complete:
        saved["last_complete"] = asdict(run)
    write_atomic(_path(assignment), json.dumps(saved, indent=1))
    return run


def _read(assignment: Assignment) -> dict:
    try:
        data = json.loads(_path(assignment).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _run(data: object) -> ValidateRun | None:
    if not isinstance(data, dict):
        return None
    try:
        return ValidateRun(**{**data, "failed": tuple(data.get("failed", ()))})
    except TypeError:
        return None


def last_runs(assignment: Assignment) -> tuple[ValidateRun | None, ValidateRun | None]:
    """(the last run of any kind, the last complete run), as recorded (None: none)."""
    saved = _read(assignment)
    return _run(saved.get("last")), _run(saved.get("last_complete"))


def _failed_text(run: ValidateRun) -> str:
    names = list(run.failed[:FAILED_SHOWN])
    more = len(run.failed) - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def shipping_check(assignment: Assignment, what: str, *, force: bool = False) -> str:
    """Whether `assignment` may ship as `what` ("the student bundle", "the autograder"): its last complete
    validate passed, of the files there now. Returns the line to print (empty when validated); raises
    ValidateRequired, saying why and what to run, when it may not and `force` is off. Never validated:
    a warning line only (a course that never ran validate ships as before, told to)."""
    last, complete = last_runs(assignment)
    command = f"grade validate {assignment.id}"
    if last is None and complete is None:
        return (f"Warning: {assignment.id} was never validated here: run {command} before {what} reaches "
                f"students")
    fingerprint = validated_fingerprint(assignment)
    if complete is not None and complete.fingerprint == fingerprint and complete.ok:
        return ""
    if complete is not None and complete.fingerprint == fingerprint:
        why = f"its last complete validate ({complete.at}) failed: {_failed_text(complete)}"
    elif complete is not None:
        why = f"its files changed since its last complete validate ({complete.at}, which " + \
              ("passed)" if complete.ok else f"failed: {_failed_text(complete)})")
    else:
        why = f"no complete validate ran (the last, {last.at}, covered {last.covered})"
    if last is not None and last.fingerprint == fingerprint and not last.complete and complete is not last:
        why += f"; a later run of these files covered {last.covered} " + \
               ("and passed" if last.ok else f"and failed: {_failed_text(last)}")
    if not force:
        raise ValidateRequired(f"{assignment.id} is not shipped: {why}. Run {command} until it passes "
                               f"(or ship it anyway with --force)")
    return f"Warning: shipping {what} of {assignment.id} unvalidated (--force): {why}"

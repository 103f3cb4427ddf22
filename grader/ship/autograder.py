"""A Gradescope autograder bundle for one assignment, and the run inside it.

Gradescope unpacks the zip into /autograder/source, runs `setup.sh` once
when it builds the image, then `run_autograder` for every submission. The
bundle carries the grader's source and exactly the course files this
assignment needs (its manifest and stubs, its reference and hidden tests,
the reference kernels), never another assignment's reference.

`setup.sh` is written for Gradescope's default base image (Ubuntu 22.04,
Python 3.10, no pip): it installs python3-venv, pip and bubblewrap with apt,
then the CPU build of torch and the grader into a virtual environment
outside /autograder, and ends with `grade sandbox`, which exits 4 when an
official grade is impossible on that machine, so the image build fails
loudly instead of grading in a weak sandbox (docs/GRADESCOPE.md says why).

`run_autograder` runs `grade autograder run ASSIGNMENT`, i.e.
`run_gradescope` below: it reads /autograder/submission where it is (the
intake reads folders without following links, within its caps),
/autograder/submission_metadata.json for the submission time, the
assignment's due date and late due date and the student's own dates (a
per-student extension), grades with `--no-record` semantics (Gradescope's
own database keeps the scores) and writes /autograder/results/results.json.
A lone notebook or zip, or one folder holding the assignment's files, is
graded as such. When the grader cannot grade at all, it still writes a
results.json that says so, with score 0, so the student sees a reason
instead of a bare failure. Every path is under `$GRADE_AUTOGRADER_HOME`
(default /autograder), so the same scripts run in a test.
"""

from __future__ import annotations

import json
import math
import os
import shlex
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.compat import NoTimeZone, parse_zoned
from grader.core.course import ENGINE_ROOT, Course
from grader.core.due import HOSTED, DueDate
from grader.core.errors import GraderError, SandboxFailed, SandboxRefused, SettingsError
from grader.core.files import SKIPPED_PARTS, tree_files, write_atomic, zip_bytes
from grader.core.manifest import Manifest
from grader.core.text import one_line
from grader.intake.submission import WORKSPACE_DEPTH

HOME_ENV = "GRADE_AUTOGRADER_HOME"
DEFAULT_HOME = "/autograder"
VENV_ENV = "GRADE_VENV"
DEFAULT_VENV = "/opt/grade-venv"  # outside /autograder: the workers' uids must read it, nothing else there
GRADESCOPE_STUDENT = "gradescope"
DEFAULT_TIMEOUT_MINUTES = 10  # Gradescope's default autograder timeout (the settings allow up to 40)
MAX_TIMEOUT_MINUTES = 40
# What a run needs on top of the submission's budget at Gradescope's default 0.5 vCPU: the
# trusted process's start (torch, pytest, the reference), the hidden suite's own work and the
# results (docs/GRADESCOPE.md has the measurements: about 40 s at one core, so twice that).
STARTUP_ALLOWANCE_S = 120
STOP_MARGIN_S = 20  # run_autograder stops the grader this long before Gradescope would stop it
# How deep run_gradescope looks for the one folder holding the assignment's files: as deep as intake
# looks inside any hand-in (grader.intake.submission.locate_workspace).

SETUP_SH = """#!/usr/bin/env bash
# Runs once when Gradescope builds the autograder image (as root, Ubuntu 22.04, Python 3.10,
# no pip). Fails, and so fails the build, when the sandbox cannot reach a level the course
# requires for an official grade on this machine: see docs/GRADESCOPE.md.
set -euo pipefail
HOME_DIR=${{{home_env}:-{default_home}}}
SOURCE="$HOME_DIR/source"
VENV=${{{venv_env}:-{default_venv}}}
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# python3-venv (and pip for it), bubblewrap (its own namespaces where the host allows them),
# libseccomp2 (the seccomp filter), coreutils (timeout, for run_autograder).
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap libseccomp2 coreutils >/dev/null
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch: Gradescope machines have no GPU, so the CPU wheel is enough and much smaller.
# (For a CUDA runner, drop --index-url and install the wheel matching its driver instead;
# timing tasks are only judged with a CUDA device and stay "pending" without one.)
"$VENV/bin/python" -m pip install -q "torch=={torch}" --index-url https://download.pytorch.org/whl/cpu
"$VENV/bin/python" -m pip install -q -e "$SOURCE"
# The workers run as uids of their own (course.toml's uid_range): they must read the interpreter
# and torch. A system Python under /usr and a venv under /opt are readable; make sure.
chmod -R o+rX "$VENV"
# The proof: start one real worker and check every layer. Exit 4 (an official grade is impossible
# here) fails the build, on purpose.
"$VENV/bin/grade" --course "$SOURCE" sandbox
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Grades one submission: $HOME_DIR/submission -> $HOME_DIR/results/results.json (see
# grader/ship/autograder.py, run_gradescope). The grader writes results.json itself, also when it
# cannot grade; this script writes one only when the grader did not run or ran out of time.
set -uo pipefail
ASSIGNMENT={assignment}
HOME_DIR=${{{home_env}:-{default_home}}}
VENV=${{{venv_env}:-{default_venv}}}
export {home_env}="$HOME_DIR"
RESULTS="$HOME_DIR/results/results.json"
mkdir -p "$HOME_DIR/results"
rm -f "$RESULTS"
[ -x "$VENV/bin/grade" ] && PATH="$VENV/bin:$PATH"
timeout --kill-after=5 {limit_s} grade --course "$HOME_DIR/source" autograder run "$ASSIGNMENT" "$@"
status=$?
if [ ! -s "$RESULTS" ]; then  # the grader writes it last: missing means it did not finish
  python3 - "$status" "$RESULTS" <<'PY'
import json, sys
status, path = int(sys.argv[1]), sys.argv[2]
if status == 124:
    reason = ("grading took longer than the autograder's time limit ({limit_s} s) and was stopped; "
              "look for code that runs very long (an endless loop, a huge input) and submit again")
elif status == 137:
    reason = ("the grader was killed, most likely by the autograder's memory limit (a very large "
              "tensor?) or its time limit; tell the course staff if your code is not the cause")
else:
    reason = f"the grader stopped unexpectedly (exit {{status}}); tell the course staff"
json.dump({{"score": 0, "output": "The grader could not grade this submission: " + reason + ".",
           "tests": []}}, open(path, "w"))
PY
fi
exit "$status"
"""


@dataclass(frozen=True)
class AutograderPaths:
    """Where Gradescope puts things (under one home folder, /autograder by default)."""

    home: Path

    @classmethod
    def from_environment(cls) -> AutograderPaths:
        return cls(Path(os.environ.get(HOME_ENV) or DEFAULT_HOME))

    @property
    def source(self) -> Path:
        return self.home / "source"

    @property
    def submission(self) -> Path:
        return self.home / "submission"

    @property
    def metadata(self) -> Path:
        return self.home / "submission_metadata.json"

    @property
    def results(self) -> Path:
        return self.home / "results" / "results.json"


@dataclass(frozen=True)
class GradescopeDates:
    """The dates in submission_metadata.json that the late policy needs, in its terms.

    Gradescope lists the assignment's `due_date` and `late_due_date`, and each user's own
    dates under `users[].assignment` (a per-student extension shows there; for a group, the
    latest of its members counts). The late policy takes them as one DueDate (`due_date`):
    the assignment's due date (the manifest's when Gradescope gives none), the student's
    extra time as its extension, and `closes_at`, when the late window closes before the
    extension shifts it, so that `closes_at + extension` is the student's own late due date."""

    submitted_at: datetime | None = None
    due: datetime | None = None
    extension: timedelta | None = None
    closes_at: datetime | None = None
    notes: tuple[str, ...] = ()

    def due_date(self, manifest_due: DueDate) -> DueDate:
        """The dates the submission is held to; `manifest_due` (the assignment's own) where Gradescope has none."""
        return replace(manifest_due, extension=self.extension, closes_at=self.closes_at,
                       extension_from="Gradescope" if self.extension else "",
                       **({"deadline": self.due, "deadline_from": HOSTED} if self.due else {}))


def _date(value: object, where: str, notes: list[str]) -> datetime | None:
    if value in (None, ""):
        return None
    try:
        return parse_zoned(str(value))
    except NoTimeZone:
        notes.append(f"submission_metadata.json: {where} has no time zone; ignored")
    except ValueError:
        notes.append(f"submission_metadata.json: {where} is not a date ({one_line(str(value), 60)!r}); ignored")
    return None


def read_metadata(path: Path) -> GradescopeDates:
    """The dates of Gradescope's submission_metadata.json (missing or unreadable: no dates, with a note)."""
    notes: list[str] = []
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return GradescopeDates(notes=("no submission_metadata.json: graded as undated",))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return GradescopeDates(notes=(f"submission_metadata.json unreadable ({type(exc).__name__}): graded "
                                      f"as undated",))
    if not isinstance(data, dict):
        return GradescopeDates(notes=("submission_metadata.json is not an object: graded as undated",))
    assignment = data.get("assignment") if isinstance(data.get("assignment"), dict) else {}
    submitted_at = _date(data.get("created_at"), "created_at", notes)
    due = _date(assignment.get("due_date"), "assignment.due_date", notes)
    late_due = _date(assignment.get("late_due_date"), "assignment.late_due_date", notes)
    own_due, own_late = [], []
    for index, user in enumerate(data.get("users") or []):
        dates = user.get("assignment") if isinstance(user, dict) else None
        if isinstance(dates, dict):
            own_due.append(_date(dates.get("due_date"), f"users[{index}].assignment.due_date", notes))
            own_late.append(_date(dates.get("late_due_date"), f"users[{index}].assignment.late_due_date", notes))
    user_due = max((d for d in own_due if d is not None), default=None)
    user_late = max((d for d in own_late if d is not None), default=None) or late_due
    extension = None
    if due is None or (user_due is not None and user_due < due):
        due = user_due or due  # no assignment date, or an earlier one of the student's own
    elif user_due is not None and user_due > due:
        extension = user_due - due
    closes_at = user_late - extension if user_late is not None and extension else user_late
    return GradescopeDates(submitted_at=submitted_at, due=due, extension=extension, closes_at=closes_at,
                           notes=tuple(notes))


def pick_workspace(folder: Path, manifest: Manifest) -> Path:
    """What to grade in Gradescope's submission folder: the folder itself when it holds one of the
    assignment's files; else a lone notebook or zip in it; else the one folder below it (a few
    levels deep, as an uploaded zip of a folder unpacks) that holds them; else the folder."""
    if any((folder / name).is_file() for name in manifest.files):
        return folder
    entries = sorted(p for p in folder.iterdir() if not p.is_symlink()) if folder.is_dir() else []
    for suffix in (".ipynb", ".zip"):
        found = [p for p in entries if p.is_file() and p.suffix == suffix]
        if len(found) == 1:
            return found[0]
    holders = []
    frontier = [p for p in entries if p.is_dir() and p.name not in SKIPPED_PARTS]
    for _ in range(WORKSPACE_DEPTH):
        holders = [p for p in frontier if any((p / name).is_file() for name in manifest.files)]
        if holders:
            break
        frontier = [c for p in frontier for c in sorted(p.iterdir())
                    if c.is_dir() and not c.is_symlink() and c.name not in SKIPPED_PARTS]
    return holders[0] if len(holders) == 1 else folder


def failure_results(reason: str, *, host_problem: bool) -> dict:
    """The results.json of a submission the grader could not grade (score 0, the reason)."""
    advice = (" This is a problem of the autograder, not of your submission: tell the course staff."
              if host_problem else " Check that you uploaded the assignment's files (or one notebook or zip).")
    return {"score": 0, "output": f"The grader could not grade this submission: {one_line(reason, 1500)}.{advice}",
            "tests": [], "extra_data": {"error": one_line(reason, 1500), "host_problem": host_problem}}


def run_gradescope(assignment: Assignment, paths: AutograderPaths | None = None, *, seed: int | None = None) -> int:
    """Grade Gradescope's submission and write its results.json; the exit status for run_autograder.

    0 when results.json holds a grade or a problem of the submission; the GraderError's exit
    code when the host cannot grade (no required sandbox level: 4), with a results.json saying so."""
    from grader.pipeline.grading import GradeRequest, open_submission
    from grader.pipeline.record import ResultsJson, grade_and_record

    paths = paths or AutograderPaths.from_environment()
    try:
        dates = read_metadata(paths.metadata)
        workspace = pick_workspace(paths.submission, assignment.manifest)
        submission = open_submission(assignment, workspace, student=GRADESCOPE_STUDENT,
                                     submitted_at=dates.submitted_at)
        request = GradeRequest(mode="submit", seed=seed, due=dates.due_date(assignment.due_date))
        grade_and_record(assignment, submission, request, [ResultsJson(paths.results, assignment.manifest)],
                         notes=dates.notes)  # the metadata's own notes, shown too
    except GraderError as exc:
        return record_failure(paths, exc)
    return 0


def record_failure(paths: AutograderPaths, exc: GraderError) -> int:
    """A results.json that says why nothing could be graded; the exit status for run_autograder.

    A host problem (no required sandbox level, unusable settings) keeps its exit code, so
    Gradescope shows the run failed; a problem of the submission or the assignment exits 0."""
    from grader.render.results import results_text

    host_problem = isinstance(exc, (SandboxRefused, SandboxFailed, SettingsError))
    write_atomic(paths.results, results_text(failure_results(str(exc), host_problem=host_problem)))
    return exc.exit_code if host_problem else 0


def _course_files(course: Course, assignment_id: str) -> dict[str, Path]:
    """Archive name → file on disk, for everything the bundle carries."""
    files: dict[str, Path] = {}
    for name in ("grader", "pyproject.toml", "README.md"):  # the course's copy, else the installed one
        for root in (course.root, ENGINE_ROOT):
            if (root / name).exists():
                files.update(tree_files(root / name, root))
                break
    templates = course.templates_dir
    files.update({f"templates/{k}": v for k, v in tree_files(templates).items()})
    for top in (course.kernels_dir, course.assignment_dir(assignment_id), course.root / "course.toml",
                course.reference_dir / "__init__.py", course.reference_for(assignment_id)):
        if top.exists():
            files.update(tree_files(top, course.root))
    return files


def _readme(assignment_id: str) -> str:
    return (f"# Autograder for {assignment_id}\n\nGradescope runs `setup.sh` once, then `run_autograder`"
            f" per submission; see grader/ship/autograder.py.\n")


def torch_requirement() -> str:
    """The torch release this grader runs here (its local '+cpu' part dropped), pinned in setup.sh."""
    import torch

    return torch.__version__.split("+")[0]


def time_needed_s(manifest: Manifest) -> float:
    """Seconds one run may take: the submission's budget and the start-up and hidden-suite allowance."""
    return manifest.limits.submission_budget_s + STARTUP_ALLOWANCE_S


def check_timeout(manifest: Manifest, timeout_minutes: int) -> None:
    """Refuse a bundle whose assignment cannot finish inside Gradescope's timeout."""
    if not 1 <= timeout_minutes <= MAX_TIMEOUT_MINUTES:
        raise GraderError(f"Gradescope's autograder timeout is 1 to {MAX_TIMEOUT_MINUTES} minutes, "
                          f"not {timeout_minutes}")
    needed = time_needed_s(manifest) + STOP_MARGIN_S
    if needed > timeout_minutes * 60:
        minutes = math.ceil(needed / 60)
        raise GraderError(
            f"{manifest.id} may need {needed:g} s (its submission budget of "
            f"{manifest.limits.submission_budget_s:g} s, {STARTUP_ALLOWANCE_S} s to start and run the hidden "
            f"suite at Gradescope's 0.5 CPU, {STOP_MARGIN_S} s to write the results), more than Gradescope's "
            f"{timeout_minutes}-minute timeout: set the assignment's autograder timeout to at least {minutes} "
            f"minutes on Gradescope and pass --timeout-minutes {minutes} (or lower [limits] "
            f"submission_budget_s in its manifest)")


def build_autograder(assignment: Assignment, out: str | Path | None = None, *,
                     timeout_minutes: int | None = None) -> Path:
    """Write the bundle zip (default: <course>/.grade/autograder/ASSIGNMENT.zip).

    `timeout_minutes` is the autograder timeout set for the assignment on Gradescope (default:
    Gradescope's); the bundle is refused when the assignment's budget does not fit in it, and
    run_autograder stops the grader STOP_MARGIN_S before it, so a results.json is always written."""
    timeout_minutes = DEFAULT_TIMEOUT_MINUTES if timeout_minutes is None else timeout_minutes
    course, assignment_id, manifest = assignment.course, assignment.id, assignment.manifest
    check_timeout(manifest, timeout_minutes)
    path = Path(out) if out else course.state_dir / "autograder" / f"{assignment_id}.zip"
    path.parent.mkdir(parents=True, exist_ok=True)
    files = _course_files(course, assignment_id)
    names = dict(home_env=HOME_ENV, default_home=DEFAULT_HOME, venv_env=VENV_ENV, default_venv=DEFAULT_VENV)
    setup = SETUP_SH.format(torch=torch_requirement(), **names)
    run = RUN_AUTOGRADER.format(assignment=shlex.quote(assignment_id), limit_s=timeout_minutes * 60 - STOP_MARGIN_S,
                                **names)

    entries = [("setup.sh", setup.encode(), 0o755), ("run_autograder", run.encode(), 0o755)]
    if "README.md" not in files:  # pyproject.toml names it; pip refuses to install without it
        entries.append(("README.md", _readme(assignment_id).encode(), 0o644))
    entries += [(name, item.read_bytes(), 0o644) for name, item in sorted(files.items())]
    write_atomic(path, zip_bytes(entries))
    return path

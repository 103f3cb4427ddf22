"""The instructor's class report: the gradebook → a view model → one HTML page.

Each student counts once, with their latest graded submission, scored as it
stands today (render/standing.py: the late policy with their current
extension, then staff overrides). Everything shown is computed here;
templates/class_report.html.j2 only lays it out. The page is self-contained
(inline CSS, the histogram as an inline PNG) so it can be mailed or
archived, and its tables fit a laptop screen (1366 px wide) whatever the
ids, names and messages are. It is for staff only: it names students, shows
similarity flags, overrides and their reasons, and batch errors.

Each student links to their own report (where it was written), and every
zero says why it is a zero: a syntax error, a missing file, a forbidden API,
a timeout, a late submission, an override...
"""

from __future__ import annotations

import os
import statistics
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.compat import UTC
from grader.core.course import Course
from grader.core.files import write_atomic
from grader.core.manifest import Manifest
from grader.core.quiz import BLANK, UNREADABLE, WRONG
from grader.core.records import FAILED, HANDIN_PROBLEM, GradeResult, Score, TaskScore, TestOutcome
from grader.core.scoring import late_fraction
from grader.core.text import one_line, printable_data
from grader.render.figures import percent, png_data_uri, pyplot
from grader.render.kind_words import every_test_failed
from grader.render.report import environment
from grader.render.similarity import clusters, find_similar, instructor_sources
from grader.render.standing import Standing, class_list, standings
from grader.storage.gradebook import Gradebook, SubmissionRecord

FAST_SHARE = 0.25  # full marks in under this share of the class's median grading time is unusual
HISTOGRAM_BINS = 10


def histogram_png(percents: list[float], bins: int = HISTOGRAM_BINS) -> str | None:
    """Score distribution (percent of the maximum) as a PNG data URI."""
    if not percents:
        return None
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6.4, 2.6), dpi=96)
    ax.hist(percents, bins=bins, range=(0, 100), color="#0969da", edgecolor="white")
    ax.set_xlabel("score (% of the maximum)", fontsize=9)
    ax.set_ylabel("students", fontsize=9)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.tick_params(labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return png_data_uri(fig)



def histogram_counts(percents: list[float], bins: int = HISTOGRAM_BINS) -> list[int]:
    """How many scores fall in each bin of [0, 100] (the last bin includes 100)."""
    counts = [0] * bins
    for p in percents:
        counts[min(bins - 1, max(0, int(p * bins // 100)))] += 1
    return counts


def _task_rows(manifest: Manifest, records: list[SubmissionRecord]) -> list[dict]:
    rows = []
    for task in manifest.tasks:
        scores = [t for r in records for t in r.result.score.tasks if t.task_id == task.id]
        judged = [t for t in scores if t.status != "pending"]
        mean = statistics.fmean(t.earned for t in judged) if judged else None
        full = sum(t.earned >= t.points for t in judged)
        misconceptions: Counter = Counter()
        titles: dict[str, dict] = {}
        who: dict[str, set[str]] = defaultdict(set)
        for record in records:
            for outcome in record.result.outcomes:
                if outcome.task == task.id and outcome.status == FAILED and outcome.diagnosis:
                    diagnosis_id = outcome.diagnosis.get("id", "?")
                    titles[diagnosis_id] = outcome.diagnosis
                    who[diagnosis_id].add(record.student_id)
        for diagnosis_id, students in who.items():
            misconceptions[diagnosis_id] = len(students)  # students, not failing tests
        rows.append({
            "id": task.id, "title": task.title, "points": task.points, "kind": task.kind,
            "bonus": task.bonus, "judged": len(judged), "pending": len(scores) - len(judged),
            "mean": None if mean is None else round(mean, 2),
            "mean_percent": None if mean is None else percent(mean, task.points),
            "pass_rate": percent(full, len(judged)) if judged else None,
            "full_marks": full,
            "misconceptions": [{"id": i, "title": titles[i].get("title", i),
                                "section": titles[i].get("section", ""), "count": n,
                                "students": sorted(who[i])}
                               for i, n in misconceptions.most_common()],
        })
    return rows


def _leaderboard(records: list[SubmissionRecord]) -> list[dict]:
    rows = []
    for record in records:
        points = {t.name: t for t in record.result.score.tests}
        for outcome in record.result.outcomes:
            timing = outcome.detail.get("timing")
            if not timing:
                continue
            allocated = points.get(outcome.name)
            rows.append({
                "student": record.student_id, "test": outcome.name, "task": outcome.task,
                "ratio": round(float(timing["ratio"]), 3),
                "student_ms": round(float(timing["student"]["median_ms"]), 4),
                "tflops": round(float(timing.get("student_tflops", 0.0)), 2),
                "reference_tflops": round(float(timing.get("reference_tflops", 0.0)), 2),
                "gpu": "CPU (interpreter)" if timing.get("cpu_timed")
                       else (timing.get("environment") or {}).get("gpu") or "?",
                "fraction": (allocated.score / allocated.max_score if allocated and allocated.max_score
                             else timing.get("fraction")),
            })
    rows.sort(key=lambda r: (r["ratio"], r["student"]))
    for rank, row in enumerate(rows, start=1):
        row["rank"] = rank
    return rows


def _outliers(records: list[SubmissionRecord]) -> tuple[list[dict], list[dict]]:
    durations = [r.result.duration_s for r in records if r.result.duration_s > 0]
    median = statistics.median(durations) if durations else 0.0
    fast = [{"student": r.student_id, "duration_s": round(r.result.duration_s, 2),
             "median_s": round(median, 2), "total": r.total}
            for r in records
            if r.max_points and r.result.score.raw >= r.max_points and len(durations) >= 3
            and r.result.duration_s < FAST_SHARE * median]
    by_sha: dict[str, list[str]] = defaultdict(list)
    for record in records:
        by_sha[record.sha256].append(record.student_id)
    identical = [{"sha": sha[:12], "students": sorted(students)}
                 for sha, students in sorted(by_sha.items()) if len(students) > 1]
    return fast, identical


def _code_of(files: dict[str, bytes], modules: tuple[str, ...]) -> str:
    texts = []
    for name in modules:
        text = files.get(name, b"").decode("utf-8", errors="replace")
        if text and text not in texts:  # a notebook gives every module the same text
            texts.append(text)
    return "\n".join(texts)


def _similarity(course: Course, manifest: Manifest, book: Gradebook,
                records: list[SubmissionRecord]) -> dict:
    code = {r.student_id: _code_of(book.files(r.id), manifest.files) for r in records}
    starter_dir = course.assignment_dir(manifest.id)
    starter = [(starter_dir / name).read_text(encoding="utf-8", errors="replace")
               for name in manifest.files if (starter_dir / name).is_file()]
    matches = find_similar({s: c for s, c in code.items() if c.strip()},
                           instructor_sources(course, manifest.id), starter)
    pairs = [m.to_dict() for m in matches if m.kind == "pair"]
    groups = []
    for members in clusters(matches):
        inside = [p for p in pairs if p["a"] in members]
        groups.append({"students": members, "pairs": inside, "percent": max(p["percent"] for p in inside)})
    return {"clusters": groups, "pairs": pairs,
            "sources": [m.to_dict() for m in matches if m.kind == "source"]}


def _import_failure(result: GradeResult, outcome: TestOutcome) -> str:
    """Why a module did not import: a missing file or a syntax error (the result's file problems), else
    the exception the import raised (the outcome's problem)."""
    missing = [p.file for p in result.file_problems if p.kind == "missing"]
    if missing:
        return "missing file: " + ", ".join(missing)
    syntax = next((p for p in result.file_problems if p.kind == "syntax"), None)
    if syntax is not None:
        return f"syntax error in {syntax.file}: {syntax.detail}"
    error = (outcome.problem or {}).get("error", "")
    return "module failed to import" + (f" ({one_line(error, 160)})" if error else "")


def _why_quiz_zero(outcomes: list[TestOutcome]) -> str:
    """Why the quiz earned nothing: no readable answers, blank answers, wrong ones, or both (from each
    question's recorded answer; a grading recorded before answers were kept says what its messages say)."""
    messages = {o.message for o in outcomes}
    answers = Counter(o.detail.get("answer") for o in outcomes)
    if answers[UNREADABLE] or (None in answers and len(messages) == 1):
        return one_line(sorted(messages)[0], 120)  # no answers.toml, or not valid TOML: one reason
    blank, wrong = answers[BLANK], answers[WRONG] + answers[None]
    if blank and not wrong:
        return "every answer blank" if blank > 1 else "the answer is blank"
    if wrong and not blank:
        return "every answer wrong" if wrong > 1 else "the answer is wrong"
    return f"{wrong} answer(s) wrong, {blank} blank"


def _why_task_zero(result: GradeResult, task: TaskScore) -> str:
    """Why one task earned 0 of its points, in a few words."""
    if task.status == "forbidden":
        groups = sorted({f.group for f in result.findings if f.task == task.task_id})
        return f"forbidden API ({', '.join(groups)})" if groups else "called a forbidden API while running"
    if task.status == "no_tests":
        return "no tests ran for this task"
    outcomes = [o for o in result.outcomes if o.task == task.task_id and o.status == FAILED]
    if not outcomes:
        return "no test passed"
    kinds = Counter(str(o.kind) for o in outcomes)
    kind, _ = kinds.most_common(1)[0]
    if task.kind == "quiz":
        return _why_quiz_zero(outcomes)
    if kind == "import_failed":
        return _import_failure(result, next(o for o in outcomes if o.kind == "import_failed"))
    if kind == "timeout":
        return "timed out (each call has the manifest's call_timeout_s)"
    return every_test_failed(kind)


def zero_reasons(manifest: Manifest, standing: Standing) -> dict[str | None, str]:
    """task id → why that task earned 0 (tasks worth points, not pending), and None → why the
    total is 0 when it is."""
    result, score = standing.record.result, standing.score
    overridden = {o.task: o for o in score.overrides}
    reasons: dict[str | None, str] = {}
    for task in score.tasks:
        if task.earned > 0 or task.points <= 0 or task.status == "pending":
            continue
        override = overridden.get(task.task_id)
        reasons[task.task_id] = (f"set to 0 by {override.author}: {override.reason}" if override
                                 else _why_task_zero(result, task))
    if score.total <= 0:
        if None in overridden:
            reasons[None] = f"set to 0 by {overridden[None].author}: {overridden[None].reason}"
        elif score.raw > 0 and late_fraction(manifest.late_policy, score.late_days) >= 1:
            reasons[None] = (f"late by {score.late_days} day(s), past the {manifest.late_policy.max_days_late} "
                             f"day(s) late work is accepted")
        elif score.raw > 0:
            reasons[None] = "submitted after the late window closed"
        else:
            distinct = list(dict.fromkeys(r for t, r in reasons.items() if t is not None))
            reasons[None] = "; ".join(distinct) if distinct else "no test passed"
    return reasons


def _report_link(course: Course, student: str, assignment_id: str, page: Path | None) -> str | None:
    """The student's own report, relative to the class report's page (None if it was never written)."""
    try:
        target = course.report_path(student, assignment_id)
    except Exception:  # an id that cannot name a report folder has no report to link to
        return None
    if not target.is_file():
        return None
    base = (page or course.reports_dir / f"{assignment_id}-class.html").resolve().parent
    return Path(os.path.relpath(target.resolve(), base)).as_posix()


def _points_text(value: float) -> str:
    return f"{value:g}"


def _overrides(standings_by_student: dict[str, Standing], book: Gradebook, assignment_id: str) -> list[dict]:
    rows = []
    for record in book.overrides(assignment_id, include_cleared=True):
        standing = standings_by_student.get(record.student_id)
        rows.append({
            "id": record.id, "student": record.student_id, "task": record.task_id or "total",
            "points": record.points, "reason": record.reason, "author": record.author,
            "created_at": record.created_at, "total_before": record.total_before,
            "total_after": record.total_after, "active": record.active,
            "cleared": (f"cleared {record.cleared_at} by {record.cleared_by}: {record.cleared_reason}"
                        if not record.active else ""),
            "earlier_files": bool(standing and record.active and standing.record.sha256 != record.sha256),
        })
    return rows


def _history(book: Gradebook, assignment_id: str, standings_by_student: dict[str, Standing]) -> list[dict]:
    """Students graded more than once: every earlier grading, and the one that counts now."""
    by_student: dict[str, list] = defaultdict(list)
    for grading in book.history(assignment_id):
        by_student[grading.student_id].append(grading)
    rows = []
    for student, gradings in sorted(by_student.items()):
        if len(gradings) < 2:
            continue
        current = standings_by_student.get(student)
        for grading in gradings:
            counts = bool(current and grading.current and grading.sha256 == current.record.sha256)
            rows.append({"student": student, "graded_at": grading.graded_at, "total": grading.total,
                         "sha": grading.sha256[:12], "counts": counts,
                         "why": ("counts now" if counts else
                                 grading.replaced_because or "")})
    return rows


def _student_row(course: Course, manifest: Manifest, standing: Standing, name: str, page: Path | None,
                 current_fingerprint: str) -> dict:
    record, score = standing.record, standing.score
    reasons = zero_reasons(manifest, standing)
    notes = []
    if None in reasons:
        notes.append(f"0: {reasons[None]}")
    if score.overrides:
        notes.append("overridden: " + ", ".join(f"{o.task or 'total'} {_points_text(o.computed or 0)} → "
                                                f"{_points_text(o.points)}" for o in score.overrides))
    notes += [f"override below the latest grading: {lowered.what} {_points_text(lowered.override.points)} < "
              f"{_points_text(lowered.earned)} earned (grade override --clear undoes it)"
              for lowered in standing.lowered]
    if standing.extension:
        notes.append(f"extension {standing.extension.describe()}")
    if record.fingerprint != current_fingerprint:
        notes.append("graded before the grading changed")
    return {"student": record.student_id, "name": name, "total": score.total,
            "percent": percent(score.total, manifest.max_points),
            "late_days": score.late_days, "form": record.result.submission_form,
            "submitted_at": record.submitted_at, "graded_at": record.graded_at,
            "duration_s": round(record.result.duration_s, 2), "sha": record.sha256[:12],
            "tasks": {t.task_id: t.earned for t in score.tasks},
            "task_notes": {t: r for t, r in reasons.items() if t is not None},
            "report": _report_link(course, record.student_id, manifest.id, page),
            "notes": notes, "zero_reason": reasons.get(None)}


def _zeros(manifest: Manifest, students: list[dict]) -> list[dict]:
    """Every zero of the class with its reason: zero totals first, then zero tasks."""
    titles = {t.id: t.title for t in manifest.tasks}
    totals = [{"student": s["student"], "task": "total", "title": "the whole assignment", "why": s["zero_reason"]}
              for s in students if s["zero_reason"]]
    zero_total = {row["student"] for row in totals}
    tasks = [{"student": s["student"], "task": task, "title": titles.get(task, task), "why": why}
             for s in students if s["student"] not in zero_total for task, why in s["task_notes"].items()]
    return totals + tasks


def class_view_model(assignment: Assignment, book: Gradebook, *, everyone: bool = False,
                     with_histogram: bool = True, with_similarity: bool = True, page: Path | None = None) -> dict:
    """Everything the class report shows, precomputed; every string made printable (grader/text.py).

    The students are the class list (render/standing.class_list): the roster's, or with `everyone` the
    students graded but not on it too; ids graded for the assignment but left out are named in
    `off_roster`. `page`: where the report will be written (links to each student's report are
    relative to it)."""
    course, assignment_id, manifest = assignment.course, assignment.id, assignment.manifest
    graded = standings(manifest, book)
    listing = class_list(book, assignment_id, set(graded), everyone=everyone)
    by_student = {s: graded[s] for s in listing.students if s in graded}
    records = [_as_final(by_student[s]) for s in sorted(by_student)]
    latest = {r.student_id: r for r in records}
    students = {s: listing.info.get(s) or {} for s in listing.students}
    all_errors = book.errors(assignment_id)
    off_roster = [{"student": s, "total": graded[s].total if s in graded else None,
                   "error": next((e["error"] for e in all_errors if e["student"] == s), "")}
                  for s in listing.left_out()]
    current_fingerprint = assignment.fingerprint
    student_rows = [_student_row(course, manifest, by_student[r.student_id],
                                 (students.get(r.student_id) or {}).get("name") or "", page, current_fingerprint)
                    for r in records]
    totals = [r.total for r in records]
    percents = [percent(t, manifest.max_points) for t in totals]
    # every entry not graded, on the roster or not (a misnamed folder): the grader's failures, and the
    # hand-ins that could not be read as a submission (an empty folder, a truncated zip), which are the student's
    errors = [e for e in all_errors if e["kind"] != HANDIN_PROBLEM]
    handin = [e for e in all_errors if e["kind"] == HANDIN_PROBLEM]
    why_missing = {e["student"]: e["kind"] for e in all_errors}
    missing = [{"student": s, "name": info.get("name") or "", "email": info.get("email") or "",
                "error": why_missing.get(s, "")}
               for s, info in sorted(students.items()) if s not in latest and listing.knows(s)]
    late = [{"student": r.student_id, "name": (students.get(r.student_id) or {}).get("name") or "",
             "submitted_at": r.submitted_at, "late_days": r.result.score.late_days,
             "penalty": r.late_penalty, "total": r.total, "due_at": r.result.score.due_at,
             "extension": by_student[r.student_id].extension.describe() if by_student[r.student_id].extension
             else ""}
            for r in records if r.result.score.late_days > 0]
    extensions = [{"student": student, "extension": record.describe(), "reason": record.reason,
                   "author": record.author, "granted_at": record.granted_at,
                   "scope": "every assignment (roster)" if not record.assignment_id else record.assignment_id}
                  for student, record in sorted(book.extensions(assignment_id).items()) if student in students]
    overrides = [o for o in _overrides(by_student, book, assignment_id) if o["student"] in students]
    history = [h for h in _history(book, assignment_id, by_student) if h["student"] in students]
    fast, identical = _outliers(records)
    return printable_data({
        "title": manifest.title, "assignment": manifest.id, "max_points": manifest.max_points,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "deadline": manifest.deadline.isoformat() if manifest.deadline else None,
        "counts": {"roster": len(listing.info), "graded": len(records), "missing": len(missing),
                   "late": len(late), "errors": len(errors), "handin": len(handin),
                   "submissions": sum(r.student_id in students for r in book.submissions(assignment_id)),
                   "off_roster": len(off_roster)},
        "everyone": everyone, "off_roster": off_roster,
        "staff": {"overrides": sum(o["active"] for o in overrides), "extensions": len(extensions),
                  "regraded": len({h["student"] for h in history}),
                  "stale": sum(r.fingerprint != current_fingerprint for r in records),
                  "zeros": sum(1 for s in student_rows if s["zero_reason"])},
        "stats": {"mean": round(statistics.fmean(totals), 2) if totals else None,
                  "median": round(statistics.median(totals), 2) if totals else None,
                  "stdev": round(statistics.stdev(totals), 2) if len(totals) > 1 else None,
                  "min": min(totals) if totals else None, "max": max(totals) if totals else None,
                  "mean_percent": round(statistics.fmean(percents), 1) if percents else None},
        "histogram": histogram_png(percents) if with_histogram else None,
        "histogram_bins": [{"label": f"{i * 100 // HISTOGRAM_BINS}–{(i + 1) * 100 // HISTOGRAM_BINS}%",
                            "count": n} for i, n in enumerate(histogram_counts(percents))],
        "tasks": _task_rows(manifest, records),
        "students": student_rows,
        "zeros": _zeros(manifest, student_rows),
        "overrides": overrides, "extensions": extensions,
        "history": history,
        "late": late, "missing": missing,
        "errors": [{**e, "sha": e["sha256"][:12], "graded": e["student"] in latest} for e in errors],
        "handin": [{**e, "sha": e["sha256"][:12], "graded": e["student"] in latest} for e in handin],
        "leaderboard": _leaderboard(records),
        "fast_full_marks": fast, "identical": identical, "fast_percent": round(100 * FAST_SHARE),
        "similarity": _similarity(course, manifest, book, records) if with_similarity
        else {"clusters": [], "pairs": [], "sources": []},
    })


def _as_final(standing: Standing) -> SubmissionRecord:
    """The record with its final score in place of the recorded one (for the tables built from records)."""
    record = standing.record
    score: Score = standing.score
    return replace(record, total=score.total, late_penalty=score.late_penalty,
                   result=replace(record.result, score=score))


def render_class_report(model: dict, templates_dir: Path) -> str:
    return environment(templates_dir).get_template("class_report.html.j2").render(**model)


def write_class_report(assignment: Assignment, book: Gradebook, out: str | Path | None = None, *,
                       everyone: bool = False) -> Path:
    """Render the report to `out` (default: <course>/.grade/reports/ASSIGNMENT-class.html); `everyone`:
    students graded but not on the roster too."""
    course = assignment.course
    path = Path(out) if out else course.reports_dir / f"{assignment.id}-class.html"
    return write_atomic(path, render_class_report(class_view_model(assignment, book, everyone=everyone, page=path),
                                                  course.templates_dir))

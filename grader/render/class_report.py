"""The instructor's class report: the gradebook → a view model → one HTML page.

Each student counts once, with their latest graded submission. Everything
shown is computed here; templates/class_report.html.j2 only lays it out. The
page is self-contained (inline CSS, the histogram as an inline PNG) so it can
be mailed or archived. It is for staff only: it names students, shows
similarity flags and batch errors.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

from grader.core.compat import UTC
from grader.core.course import Course
from grader.core.manifest import Manifest, load_manifest
from grader.core.records import FAILED
from grader.core.text import printable_data
from grader.render.figures import percent, png_data_uri, pyplot
from grader.render.report import environment
from grader.render.similarity import clusters, find_similar, instructor_sources
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
                           instructor_sources(course.root, manifest.id), starter)
    pairs = [m.to_dict() for m in matches if m.kind == "pair"]
    groups = []
    for members in clusters(matches):
        inside = [p for p in pairs if p["a"] in members]
        groups.append({"students": members, "pairs": inside, "percent": max(p["percent"] for p in inside)})
    return {"clusters": groups, "pairs": pairs,
            "sources": [m.to_dict() for m in matches if m.kind == "source"]}


def class_view_model(course: Course, assignment_id: str, book: Gradebook, *,
                     with_histogram: bool = True, with_similarity: bool = True) -> dict:
    """Everything the class report shows, precomputed; every string made printable (grader/text.py)."""
    manifest = load_manifest(course.assignment_dir(assignment_id) / "assignment.toml")
    latest = book.latest(assignment_id)
    records = [latest[s] for s in sorted(latest)]
    students = {s["id"]: s for s in book.students()}
    totals = [r.total for r in records]
    percents = [percent(t, manifest.max_points) for t in totals]
    errors = book.errors(assignment_id)
    missing = [{"student": s, "name": info.get("name") or "", "email": info.get("email") or "",
                "error": any(e["student"] == s for e in errors)}
               for s, info in sorted(students.items()) if s not in latest]
    late = [{"student": r.student_id, "name": (students.get(r.student_id) or {}).get("name") or "",
             "submitted_at": r.submitted_at, "late_days": r.result.score.late_days,
             "penalty": r.late_penalty, "total": r.total}
            for r in records if r.result.score.late_days > 0]
    fast, identical = _outliers(records)
    return printable_data({
        "title": manifest.title, "assignment": manifest.id, "max_points": manifest.max_points,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "deadline": manifest.deadline.isoformat() if manifest.deadline else None,
        "counts": {"roster": len(students), "graded": len(records), "missing": len(missing),
                   "late": len(late), "errors": len(errors),
                   "submissions": len(book.submissions(assignment_id))},
        "stats": {"mean": round(statistics.fmean(totals), 2) if totals else None,
                  "median": round(statistics.median(totals), 2) if totals else None,
                  "stdev": round(statistics.stdev(totals), 2) if len(totals) > 1 else None,
                  "min": min(totals) if totals else None, "max": max(totals) if totals else None,
                  "mean_percent": round(statistics.fmean(percents), 1) if percents else None},
        "histogram": histogram_png(percents) if with_histogram else None,
        "histogram_bins": [{"label": f"{i * 100 // HISTOGRAM_BINS}–{(i + 1) * 100 // HISTOGRAM_BINS}%",
                            "count": n} for i, n in enumerate(histogram_counts(percents))],
        "tasks": _task_rows(manifest, records),
        "students": [{"student": r.student_id, "name": (students.get(r.student_id) or {}).get("name") or "",
                      "total": r.total, "percent": percent(r.total, manifest.max_points),
                      "late_days": r.result.score.late_days, "form": r.result.submission_form,
                      "submitted_at": r.submitted_at, "graded_at": r.graded_at,
                      "duration_s": round(r.result.duration_s, 2), "sha": r.sha256[:12],
                      "tasks": {t.task_id: t.earned for t in r.result.score.tasks}}
                     for r in records],
        "late": late, "missing": missing,
        "errors": [{**e, "sha": e["sha256"][:12], "graded": e["student"] in latest} for e in errors],
        "leaderboard": _leaderboard(records),
        "fast_full_marks": fast, "identical": identical, "fast_percent": round(100 * FAST_SHARE),
        "similarity": _similarity(course, manifest, book, records) if with_similarity
        else {"clusters": [], "pairs": [], "sources": []},
    })


def render_class_report(model: dict, templates_dir: Path) -> str:
    return environment(templates_dir).get_template("class_report.html.j2").render(**model)


def write_class_report(course: Course, assignment_id: str, book: Gradebook,
                       out: str | Path | None = None) -> Path:
    """Render the report to `out` (default: <course>/.grade/reports/ASSIGNMENT-class.html)."""
    path = Path(out) if out else course.reports_dir / f"{assignment_id}-class.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    html = render_class_report(class_view_model(course, assignment_id, book), course.templates_dir)
    path.write_text(html, encoding="utf-8")
    return path

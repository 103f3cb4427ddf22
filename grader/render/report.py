"""Rendering only: a GradeResult → a self-contained HTML page, or a terminal table.

All numbers are computed here (or earlier); the Jinja2 templates only lay
them out. Heatmaps are small PNGs made with matplotlib and inlined as data
URIs, so a report works offline and can be mailed or printed.
"""

from __future__ import annotations

from pathlib import Path

import jinja2

from grader.core.records import FAILED, PASSED, PENDING, GradeResult
from grader.core.scoring import test_scores
from grader.core.text import printable_data
from grader.render.figures import percent, png_data_uri, pyplot

KIND_WORDS = {
    "wrong": "wrong result", "raised": "raised an exception", "not_implemented": "not implemented",
    "timeout": "timed out", "crashed": "crashed", "forbidden": "forbidden API",
    "missing": "function missing", "import_failed": "module failed to import",
    "unsupported": "unsupported return type", "budget": "time budget used up",
    "test_error": "result unusable", "not_run": "not run here",
}


def environment(templates_dir: Path) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir)),
                              autoescape=jinja2.select_autoescape(["html", "j2"]),
                              undefined=jinja2.StrictUndefined)


def heatmap_png(student: list[list[float]], reference: list[list[float]]) -> str:
    """Student | reference | difference as one PNG data URI."""
    plt = pyplot()
    import numpy as np

    s, r = np.asarray(student, dtype=float), np.asarray(reference, dtype=float)
    s = np.nan_to_num(s, nan=0.0, posinf=0.0, neginf=0.0)
    fig, axes = plt.subplots(1, 3, figsize=(7.2, 2.6), dpi=90)
    vmax = max(float(np.abs(r).max()), float(np.abs(s).max()), 1e-9)
    for ax, data, title, cmap, vrange in (
        (axes[0], s, "yours", "viridis", (min(0.0, s.min()), vmax)),
        (axes[1], r, "expected", "viridis", (min(0.0, r.min()), vmax)),
        (axes[2], s - r, "difference", "coolwarm", (-max(np.abs(s - r).max(), 1e-9),
                                                    max(np.abs(s - r).max(), 1e-9))),
    ):
        image = ax.imshow(data, cmap=cmap, vmin=vrange[0], vmax=vrange[1])
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
        ax.tick_params(labelsize=7)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=6)
    fig.tight_layout()
    return png_data_uri(fig)



def view_model(result: GradeResult) -> dict:
    """Everything the template shows, precomputed; every string made printable (grader/text.py)."""
    score = result.score
    points = {id(o): t for o, t in zip(result.outcomes, score.tests or test_scores(score.tasks, result.outcomes),
                                          strict=True)}
    tasks = []
    for task in score.tasks:
        outcomes = [o for o in result.outcomes if o.task == task.task_id]
        tests = []
        for o in outcomes:
            timing = o.detail.get("timing")
            allocated = points[id(o)]
            tests.append({
                "name": o.name, "status": o.status, "kind": KIND_WORDS.get(o.kind, o.kind),
                # the diagnosis gets its own box, so the message keeps only what was measured
                "message": o.message.split("\nLikely cause:")[0] if o.diagnosis else o.message,
                "diagnosis": o.diagnosis, "measured": o.measured,
                "output": o.output, "heatmap": heatmap_png(o.heatmap["student"], o.heatmap["reference"])
                if o.heatmap and o.status == FAILED else None,
                "timing": timing,
                "speed_percent": percent(allocated.score, allocated.max_score) if timing else None,
                "timed_on": ("CPU (interpreter)" if timing.get("cpu_timed")
                             else (timing.get("environment") or {}).get("gpu")) if timing else None,
            })
        share = percent(task.earned, task.points)
        if task.status != "graded":
            badge, badge_text = task.status, task.status
        else:
            badge = "passed" if share >= 100 else "failed"
            badge_text = f"{task.passed}/{task.passed + task.failed} tests"
        if task.passed and task.failed == 0 and task.status == "graded":
            tests_line = f"All {task.passed} tests passed."
        elif task.passed:
            tests_line = f"{task.passed} other test(s) passed."
        else:
            tests_line = ""
        tasks.append({
            "id": task.task_id, "title": task.title, "earned": round(task.earned, 2),
            "points": task.points,
            "percent": share, "status": task.status,
            "reason": task.reason, "bonus": task.bonus, "sections": ", ".join(task.sections),
            "passed": task.passed, "failed": task.failed, "pending": task.pending,
            "bar": "zero" if task.earned == 0 else ("partial" if share < 100 else ""),
            "badge": badge, "badge_text": badge_text, "tests_line": tests_line,
            "all_passed": bool(task.passed and task.failed == 0 and task.status == "graded"),
            "tests": tests,
        })
    not_graded = [f"{t['title']}: {t['reason']}" for t in tasks if t["status"] == "pending"]
    return printable_data({
        "title": result.assignment_title, "assignment": result.assignment_id,
        "student": result.student, "mode": result.mode,
        "total": round(score.total, 2), "total_exact": score.total, "max_points": score.max_points,
        "raw": round(score.raw, 2),
        "percent": percent(score.total, score.max_points),
        "late_days": score.late_days, "late_penalty": round(score.late_penalty, 2),
        "pending_points": score.pending_points, "bonus_earned": score.bonus_earned,
        "tasks": tasks, "not_graded": not_graded,
        "findings": [f.to_dict() for f in result.findings],
        "notes": list(result.notes), "seed": result.seed, "isolation": result.isolation,
        "graded_at": result.graded_at, "submitted_at": result.submitted_at,
        "sha": result.submission_sha256[:12], "versions": result.versions,
        "duration": result.duration_s, "student_output": result.student_output,
        "counts": {s: sum(o.status == s for o in result.outcomes) for s in (PASSED, FAILED, PENDING)},
    })


def render_html(result: GradeResult, templates_dir: Path) -> str:
    return environment(templates_dir).get_template("report.html.j2").render(**view_model(result))


def write_html(result: GradeResult, path: str | Path, templates_dir: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(result, templates_dir), encoding="utf-8")
    return path

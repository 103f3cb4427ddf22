"""Rendering only: a GradeResult → a self-contained HTML page, or a terminal table.

All numbers are computed here (or earlier); the Jinja2 templates only lay
them out. Heatmaps are small PNGs made with matplotlib and inlined as data
URIs, so a report works offline and can be mailed or printed.

Everyone can read the page: the heatmaps use colour-blind-safe palettes and
come with their largest differences as numbers (a table, and the image's
text alternative says where the largest is); the total is a labelled live
region; tasks are in `presentation.task_order`, a bonus task not attempted
shown as such (neutral), and the points not judged here say who judges them.
The accessibility audit (axe-core in headless Chromium) runs in the test suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from grader.core.records import FAILED, PASSED, PENDING, GradeResult, TestOutcome
from grader.core.scoring import test_scores
from grader.core.text import printable_data
from grader.render.behaviour import behaviour_view
from grader.render.figures import percent, png_data_uri, pyplot
from grader.render.kind_words import kind_label
from grader.render.presentation import (
    NOT_ATTEMPTED,
    not_attempted_ids,
    status_words,
    task_order,
    unjudged,
    unjudged_points,
)

# Colour maps that stay readable with every common colour-vision deficiency: viridis (sequential,
# perceptually uniform, monotone in lightness) for the two matrices, and ColorBrewer's PuOr
# (diverging purple–orange, colour-blind safe; no red against green) for their difference.
VALUES_CMAP = "viridis"
DIFFERENCE_CMAP = "PuOr"
LARGEST_DIFFERENCES = 5  # the text alternative of a heatmap: this many of its largest differences


def environment(templates_dir: Path) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(templates_dir)),
                              autoescape=jinja2.select_autoescape(["html", "j2"]),
                              undefined=jinja2.StrictUndefined)


def heatmap_png(student: list[list[float]], reference: list[list[float]],
                rows: tuple[int, int] | None = None, cols: tuple[int, int] | None = None) -> str:
    """Student | reference | difference as one PNG data URI; `rows`/`cols` are the window's first
    and end indices in the full matrix (the axes are labelled with them)."""
    plt = pyplot()
    import numpy as np

    s, r = np.asarray(student, dtype=float), np.asarray(reference, dtype=float)
    s = np.nan_to_num(s, nan=0.0, posinf=0.0, neginf=0.0)
    r = np.nan_to_num(r, nan=0.0, posinf=0.0, neginf=0.0)
    top, left = (rows or (0,))[0], (cols or (0,))[0]
    extent = (left - 0.5, left + s.shape[1] - 0.5, top + s.shape[0] - 0.5, top - 0.5)
    fig, axes = plt.subplots(1, 3, figsize=(7.2, 2.6), dpi=90)
    vmax = max(float(np.abs(r).max()), float(np.abs(s).max()), 1e-9)
    for ax, data, title, cmap, vrange in (
        (axes[0], s, "yours", VALUES_CMAP, (min(0.0, s.min()), vmax)),
        (axes[1], r, "expected", VALUES_CMAP, (min(0.0, r.min()), vmax)),
        (axes[2], s - r, "difference", DIFFERENCE_CMAP, (-max(np.abs(s - r).max(), 1e-9),
                                                         max(np.abs(s - r).max(), 1e-9))),
    ):
        image = ax.imshow(data, cmap=cmap, vmin=vrange[0], vmax=vrange[1], extent=extent)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("key", fontsize=8)
        ax.set_ylabel("query", fontsize=8)
        ax.tick_params(labelsize=7)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=6)
    fig.tight_layout()
    return png_data_uri(fig)


def _number(value: float) -> str:
    """A matrix entry for a person to read: 4 significant digits, NaN and infinities by name."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+∞" if value > 0 else "−∞"
    return f"{value:.4g}".replace("-", "−")


def largest_differences(heatmap: dict, count: int = LARGEST_DIFFERENCES) -> list[dict]:
    """The `count` entries of a recorded heatmap where yours and the expected matrix differ most
    (a NaN or an infinity first), largest first, each with its query and key index in the full
    matrix (the window's `rows`/`cols` offsets added): the heatmap's numbers, for a reader who
    cannot see its colours."""
    top, left = (heatmap.get("rows") or (0,))[0], (heatmap.get("cols") or (0,))[0]
    found = []
    for i, (row_s, row_r) in enumerate(zip(heatmap.get("student", []), heatmap.get("reference", []), strict=False)):
        for j, (mine, expected) in enumerate(zip(row_s, row_r, strict=False)):
            gap = mine - expected
            size = abs(gap) if gap == gap and abs(gap) != float("inf") else float("inf")
            if size > 0:
                found.append((size, i, j, mine, expected, gap))
    found.sort(key=lambda item: (-item[0], item[1], item[2]))
    return [{"query": top + i, "key": left + j, "yours": _number(mine), "expected": _number(expected),
             "difference": ("+" if gap > 0 else "") + _number(gap)}
            for _, i, j, mine, expected, gap in found[:count]]


def _heatmap_alt(heatmap: dict, largest: list[dict]) -> str:
    """The heatmap image's text alternative: what it shows and where it differs most."""
    where = ""
    if heatmap.get("rows") and heatmap.get("cols"):
        (r0, r1), (c0, c1) = heatmap["rows"], heatmap["cols"]
        where = f" for queries {r0}–{r1 - 1} and keys {c0}–{c1 - 1}"
    text = f"Three heatmaps{where}: your matrix, the expected one, and their difference."
    if largest:
        first = largest[0]
        text += (f" The largest difference is {first['difference']} at query {first['query']}, key {first['key']} "
                 f"(yours {first['yours']}, expected {first['expected']}); the table below lists the largest.")
    return text


def _heatmap_difference(heatmap: dict) -> float:
    """The largest |yours − expected| of a recorded heatmap (older records lack `max_diff`)."""
    if "max_diff" in heatmap:
        return float(heatmap["max_diff"])
    worst = 0.0
    for row_s, row_r in zip(heatmap.get("student", []), heatmap.get("reference", []), strict=False):
        for a, b in zip(row_s, row_r, strict=False):
            gap = abs(a - b)
            worst = max(worst, gap if gap == gap else 1e30)  # NaN counts as the largest difference
    return worst


def _variant_words(variants: set[tuple]) -> str:
    """{(("BLOCK_N", 16),), (("BLOCK_N", 32),)} → 'BLOCK_N = 16 or 32'."""
    names = sorted({name for variant in variants for name, _ in variant})
    parts = []
    for name in names:
        values = sorted({value for variant in variants for n, value in variant if n == name})
        parts.append(f"{name} = " + " or ".join(str(v) for v in values))
    return ", ".join(parts)


def cause_key(outcome: TestOutcome) -> tuple[str, str]:
    """What a failure is attributed to: the diagnosis, else the measured problem, else its kind and
    message (records from before problems were kept as data)."""
    if outcome.diagnosis and outcome.diagnosis.get("id"):
        return "diagnosis", str(outcome.diagnosis["id"])
    if outcome.problem and outcome.problem.get("key"):
        return "problem", str(outcome.problem["key"])
    return "message", f"{outcome.kind}:{outcome.message}"


@dataclass
class CauseGroup:
    """The failing tests of one task that one cause explains, in test order."""

    task: str | None
    key: tuple[str, str]
    outcomes: list[TestOutcome] = field(default_factory=list)

    @property
    def first(self) -> TestOutcome:
        return self.outcomes[0]

    @property
    def diagnosis(self) -> dict | None:
        return self.first.diagnosis if self.key[0] == "diagnosis" else None

    @property
    def title(self) -> str:
        """The cause in a few words: the diagnosis's title, or the measured problem's summary."""
        if self.diagnosis:
            return str(self.diagnosis.get("title", ""))
        if self.first.problem and self.first.problem.get("summary"):
            return str(self.first.problem["summary"])
        return kind_label(self.first.kind)

    @property
    def variants(self) -> str:
        """The tile sizes (or other variants) that reproduced the student's output in every test
        that could tell them apart ("BLOCK_N = 16"); when no one value fits them all, each
        test's own ("BLOCK_N = 16; BLOCK_N = 32")."""
        sets = [{tuple(sorted(v.items())) for v in (o.diagnosis or {}).get("variants") or []}
                for o in self.outcomes]
        sets = [found for found in sets if found]
        if not sets:
            return ""
        common = set.intersection(*sets)
        if common:
            return _variant_words(common)
        texts = []
        for found in sets:
            text = _variant_words(found)
            if text not in texts:
                texts.append(text)
        return "; ".join(texts)

    def line(self, outcome: TestOutcome) -> str:
        """What was measured in one of the tests (the diagnosis is the group's, not repeated)."""
        return outcome.measured or (outcome.problem or {}).get("text") or outcome.message

    def detail(self) -> str:
        """The first test's own account: what was measured for a diagnosed cause; for a property that does not
        hold, what was measured and where to read (the block's title already names the property); else its
        message."""
        if self.diagnosis:
            text = self.line(self.first)
            frames = (self.first.problem or {}).get("frames") or []
            return text + ("\n  " + "\n  ".join(frames) if frames else "")
        problem = self.first.problem or {}
        measured = (problem.get("difference") or {}).get("text") if problem.get("property") else None
        if measured:
            section = problem.get("section")
            return f"Measured: {measured}." + (f"\nSee lecture {section}." if section else "")
        return self.first.message

    def heatmap_outcome(self) -> TestOutcome | None:
        """The test whose recorded heatmap shows the largest difference."""
        shown = [o for o in self.outcomes if o.heatmap and o.heatmap.get("student")]
        return max(shown, key=lambda o: _heatmap_difference(o.heatmap)) if shown else None


def failure_groups(outcomes: list[TestOutcome] | tuple[TestOutcome, ...]) -> list[CauseGroup]:
    """Failed tests grouped by (task, cause), in order of first appearance: one bug, one group."""
    groups: dict[tuple, CauseGroup] = {}
    for outcome in outcomes:
        if outcome.status != FAILED:
            continue
        key = cause_key(outcome)
        group = groups.setdefault((outcome.task, key), CauseGroup(outcome.task, key))
        group.outcomes.append(outcome)
    return list(groups.values())


def _heatmap_caption(outcome: TestOutcome) -> str:
    heatmap = outcome.heatmap or {}
    where = []
    if heatmap.get("slice"):
        where.append("batch/head index [" + ", ".join(str(i) for i in heatmap["slice"]) + "]")
    if heatmap.get("rows") and heatmap.get("cols"):
        (r0, r1), (c0, c1) = heatmap["rows"], heatmap["cols"]
        where.append(f"queries {r0}–{r1 - 1}, keys {c0}–{c1 - 1}")
    place = (", ".join(where) + " — ") if where else ""
    return f"{place}the slice with the largest difference, from {outcome.name}"


def _inputs_text(inputs: list[dict]) -> str:
    """A call's recorded inputs (TestOutcome.problem["inputs"]) in words."""
    words = []
    for item in inputs:
        if "shape" in item:
            text = f"{tuple(item['shape'])} {item.get('dtype', '')}".strip()
        else:
            text = str(item.get("value", ""))
        argument = str(item.get("argument", ""))
        words.append(text if argument.isdigit() else f"{argument}={text}")
    return ", ".join(words)


def crashed_inputs(group: CauseGroup) -> list[str]:
    """The inputs the group's tests ended the process on (recorded as data), each once, in test order."""
    seen: list[str] = []
    for outcome in group.outcomes:
        inputs = (outcome.problem or {}).get("inputs")
        if outcome.kind == "crashed" and inputs:
            text = _inputs_text(inputs)
            if text not in seen:
                seen.append(text)
    return seen


def _group_view(group: CauseGroup) -> dict:
    shown = group.heatmap_outcome()
    heatmap = shown.heatmap if shown else None
    diagnosis = group.diagnosis
    detail = group.detail()
    largest = largest_differences(heatmap) if heatmap else []
    return {
        "key": ":".join(group.key), "title": group.title, "count": len(group.outcomes),
        "kind": kind_label(group.first.kind),
        "diagnosis": {**diagnosis, "variants": group.variants} if diagnosis else None,
        "detail": detail,
        "tests": [{"name": o.name, "line": "" if group.line(o) in detail else group.line(o), "output": o.output}
                  for o in group.outcomes],
        "heatmap": heatmap_png(heatmap["student"], heatmap["reference"], heatmap.get("rows"), heatmap.get("cols"))
        if heatmap else None,
        "heatmap_caption": _heatmap_caption(shown) if shown else "",
        "heatmap_alt": _heatmap_alt(heatmap, largest) if heatmap else "",
        "largest_differences": largest,
        "crashed_on": crashed_inputs(group),
    }


def view_model(result: GradeResult) -> dict:
    """Everything the template shows, precomputed; every string made printable (grader/text.py).

    Tasks come in `presentation.task_order` (the required ones, then the bonus ones). Failures
    are shown per task and cause (`failure_groups`): one block per cause, listing the tests it
    explains; pending and timed tests keep a block each. A bonus task not attempted gets a
    neutral line instead of its failures."""
    score = result.score
    points = {id(o): t for o, t in zip(result.outcomes, score.tests or test_scores(score.tasks, result.outcomes),
                                          strict=True)}
    groups = failure_groups(result.outcomes)
    skipped = not_attempted_ids(result)
    waiting = {item.task_id: item for item in unjudged(result)}
    tasks = []
    for task in task_order(score.tasks):
        outcomes = [o for o in result.outcomes if o.task == task.task_id]
        left_out = task.task_id in skipped
        tests = []
        for o in outcomes:
            timing = o.detail.get("timing")
            if o.status == FAILED and not timing:
                continue  # shown in its cause's block
            if o.status == PASSED and not timing:
                continue
            allocated = points[id(o)]
            tests.append({
                "name": o.name, "status": o.status, "kind": kind_label(o.kind),
                "message": o.message, "output": o.output, "timing": timing,
                "speed_percent": percent(allocated.score, allocated.max_score) if timing else None,
                "timed_on": ("CPU (interpreter)" if timing.get("cpu_timed")
                             else (timing.get("environment") or {}).get("gpu")) if timing else None,
            })
        share = percent(task.earned, task.points)
        if left_out:
            badge, badge_text = "neutral", NOT_ATTEMPTED
        elif task.status == "no_tests" and task.task_id in waiting:
            badge, badge_text = "pending", "no public test"
        elif task.status != "graded":
            badge, badge_text = task.status, status_words(task.status, result.mode)
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
            "bar": "neutral" if left_out else "zero" if task.earned == 0 else ("partial" if share < 100 else ""),
            "badge": badge, "badge_text": badge_text, "tests_line": tests_line,
            "all_passed": bool(task.passed and task.failed == 0 and task.status == "graded"),
            "not_attempted": left_out,
            "not_attempted_tests": [o.name for o in outcomes if o.status == FAILED] if left_out else [],
            "who": waiting[task.task_id].who if task.task_id in waiting else "",
            "causes": [] if left_out else [_group_view(g) for g in groups if g.task == task.task_id and
                                           not any(o.detail.get("timing") for o in g.outcomes)],
            "tests": tests,
            "behaviour": [view for view in (behaviour_view(o, task.failed > 0) for o in outcomes) if view is not None],
        })
    pending = unjudged(result)
    left_out_tests = sum(o.status == FAILED for o in result.outcomes if o.task in skipped)
    return printable_data({
        "title": result.assignment_title, "assignment": result.assignment_id,
        "student": result.student, "mode": result.mode,
        "total": round(score.total, 2), "total_exact": score.total, "max_points": score.max_points,
        "raw": round(score.raw, 2),
        "percent": percent(score.total, score.max_points),
        "late_days": score.late_days, "late_penalty": round(score.late_penalty, 2),
        "pending_points": unjudged_points(pending), "bonus_earned": score.bonus_earned,
        "tasks": tasks, "not_graded": [item.line() for item in pending],
        "findings": [f.to_dict() for f in result.findings],
        "notes": list(result.notes), "seed": result.seed, "isolation": result.isolation,
        "graded_at": result.graded_at, "submitted_at": result.submitted_at,
        "sha": result.submission_sha256[:12], "versions": result.versions,
        "duration": result.duration_s, "student_output": result.student_output,
        "counts": {PASSED: sum(o.status == PASSED for o in result.outcomes),
                   FAILED: sum(o.status == FAILED for o in result.outcomes) - left_out_tests,
                   PENDING: sum(o.status == PENDING for o in result.outcomes),
                   "not_attempted": left_out_tests},
    })


def _shown(cause: dict) -> str:
    """Everything a cause block shows in words (its title, the first test's account, each test's line)."""
    return " ".join([cause["title"], cause["detail"], *(t["line"] for t in cause["tests"])])


def contradictions(view: dict) -> list[str]:
    """Lines of a report (`view_model`'s data, as shown) that contradict another line of the same task, in
    words (none for a consistent report): a green "nothing to change" from the kernel's counts in a task with
    a failure, or "placeholder" (a result that does not depend on the inputs) beside a most-likely cause."""
    found = []
    for task in view["tasks"]:
        causes = task["causes"]
        if causes and any((b.get("verdict") or {}).get("status") == "passed" for b in task["behaviour"]):
            found.append(f"{task['id']}: the kernel panel says nothing to change beside a failure "
                         f"({causes[0]['title']})")
        if any("placeholder" in _shown(c).lower() for c in causes):
            for cause in causes:
                if cause.get("diagnosis"):
                    found.append(f"{task['id']}: a placeholder beside the most likely cause "
                                 f"{cause['diagnosis'].get('title', '')!r}")
    return found


def render_html(result: GradeResult, templates_dir: Path) -> str:
    return environment(templates_dir).get_template("report.html.j2").render(**view_model(result))


"""Reports everyone can read: the student's report of each assignment and the class report pass
axe-core's audit (WCAG 2.0-2.2 A and AA, and its best practices) in a real headless Chromium with
every <details> open, work with the keyboard alone (every link and summary takes the focus and
shows a ring; no script, handler or positive tabindex that could trap or reorder it), announce the
total, and give every heatmap a colour-blind-safe palette and its largest differences as numbers.

Each assignment is graded once (a module fixture): assignments 1 and 2 with the submission of the
docs' screenshots (scripts/report_screenshots.py: catalogued mistakes, heatmaps, diagnoses), and
assignment 3's stubs, whose report has every kind of cause, a bonus task not attempted and the
speed points pending. The class report is built from scored results, as in
tests/test_class_report_staff.py, with every section filled.

axe-core comes from npm (`npm ci` at the course root; package.json pins it; .ci/run installs it).
"""

from __future__ import annotations

import re
import tempfile
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from grader.core.assignment import Assignment
from grader.core.course import Course
from grader.core.records import TestOutcome
from grader.intake.submission import Submission
from grader.pipeline.grading import GradeRequest, grade, open_submission
from grader.render.report import DIFFERENCE_CMAP, VALUES_CMAP, largest_differences
from grader.storage.gradebook import Gradebook
from tests.browser import AXE_MISSING, audit, axe_core, chromium, violations_text
from tests.conftest import ROOT, copy_mini_course, write_report

NO_BROWSER = pytest.mark.skipif(chromium() is None, reason="no Chromium installed (apt-get install chromium)")
NO_AXE = pytest.mark.skipif(axe_core() is None, reason=AXE_MISSING)
ASSIGNMENTS = ("assignment1", "assignment2", "assignment3")


def _workspace(assignment: Assignment, folder: Path) -> Path | None:
    """The docs' showcase submission (assignments 1 and 2), or None for the stubs (assignment 3)."""
    if assignment.id == "assignment3":
        return None
    from scripts.report_screenshots import failing_workspace

    return failing_workspace(assignment, folder / "student")


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def student_report(request, tmp_path_factory) -> dict:
    """One assignment graded once, its report written and audited: {"result", "html", "audit"}."""
    if chromium() is None or axe_core() is None:
        pytest.skip("no Chromium installed" if chromium() is None else AXE_MISSING)
    course = Course(ROOT)
    assignment = Assignment.load(course, request.param)
    out = tmp_path_factory.mktemp(request.param)
    with tempfile.TemporaryDirectory() as temp:
        workspace = _workspace(assignment, Path(temp))
        result = grade(assignment, open_submission(assignment, workspace, student="sample-student"),
                       GradeRequest(seed=11, allow_weak_sandbox=True))
    page = write_report(result, out / "report.html", course.templates_dir)
    return {"result": result, "html": page.read_text(encoding="utf-8"), "audit": audit(page)}


class TestStudentReport:
    """Each assignment's report (graded in a sandbox worker, once per assignment)."""

    pytestmark = [pytest.mark.sandbox, pytest.mark.browser, NO_BROWSER, NO_AXE]

    def test_passes_the_accessibility_audit(self, student_report):
        found = student_report["audit"]
        assert found["passes"] > 20, found  # axe really ran its rules on the page
        assert found["violations"] == [], violations_text(found)

    def test_works_with_the_keyboard_alone(self, student_report):
        keyboard = student_report["audit"]["keyboard"]
        assert keyboard["reachable"] >= 5  # the task links and the <summary> of each collapsible section
        assert keyboard["no_focus"] == [] and keyboard["no_ring"] == []
        assert keyboard["positive_tabindex"] == [] and keyboard["handlers"] == [] and keyboard["scripts"] == 0
        assert keyboard["summaries_outside_details"] == []

    def test_announces_the_total(self, student_report):
        score = student_report["result"].score
        status = re.search(r'<div class="total" role="status" aria-label="([^"]*)">', student_report["html"])
        assert status, "the total is not a labelled live region"
        assert status.group(1).startswith(f"Total: {round(score.total, 2):g} of {score.max_points:g} points")

    def test_every_heatmap_has_its_largest_differences_in_words_and_numbers(self, student_report):
        html, result = student_report["html"], student_report["result"]
        figures = re.findall(r'<img class="heatmap" alt="([^"]*)"', html)
        tables = re.findall(r'<table class="diffs"><caption>The largest differences', html)
        if result.assignment_id == "assignment1":  # its showcase submission has attention-weight heatmaps
            assert figures
        assert len(tables) == len(figures)
        for alt in figures:
            assert alt.startswith("Three heatmaps") and "The largest difference is" in alt, alt


# ------------------------------------------------------------------ the class report
@pytest.fixture
def class_report(tmp_path: Path) -> Path:
    """The class report of a class with every section filled: zeros of every cause, an override,
    an extension, a regrade, a grader error, a missing student, a timed kernel and similar code."""
    from test_class_report_staff import outcome, record_all, result, the_class

    course = tmp_path / "course"
    copy_mini_course(course)
    gradebook = tmp_path / "gb.sqlite"
    timing = {"ratio": 1.4, "verified": True, "student": {"median_ms": 0.52}, "student_tflops": 3.1,
              "reference_tflops": 4.2, "environment": {"gpu": "NVIDIA H100"}}
    code = (course / "reference" / "mini" / "mini.py").read_text()
    with Gradebook(gradebook) as book:
        results = the_class(course)
        # The class is on the roster (a report lists the roster's students), with one who handed nothing in.
        book.import_roster([{"id": s, "name": s.title(), "email": f"{s}@example.edu"}
                            for s in [g.student for g in results] + ["twin1", "twin2", "zz-broken"]]
                           + [{"id": "nobody", "name": "Not Handed In", "email": "nobody@example.edu"}])
        record_all(course, book, results)
        book.record(results[5], Submission(files={"mini.py": b"# late\n"}, source="x", form="folder",
                                           student="late"), replaced_because="regraded with --force")
        for student in ("twin1", "twin2"):  # the reference's code, handed in twice
            timed = TestOutcome(name="t1", task="double", status="passed", fraction=1.0, detail={"timing": timing})
            graded = result(course, student, [timed, outcome("normalize", "t2")])
            book.record(graded, Submission(files={"mini.py": code.encode()}, source="x", form="folder",
                                           student=student))
        book.add_override("ada", "mini", None, 0, "copied the exam", sha256=results[0].submission_sha256,
                          total_before=100, total_after=0, author="prof")
        book.set_extension("late", "mini", until=datetime.fromisoformat("2026-12-05T12:00:00+00:00"),
                           reason="hospital", author="ta1")
        book.record_error("zz-broken", "mini", "0" * 64, "SubmissionError: the zip is damaged")
    for graded in results[:2]:
        write_report(graded, Course(course).report_path(graded.student, "mini"), Course(course).templates_dir)
    out = tmp_path / "class.html"
    done = CliRunner().invoke(main, ["--course", str(course), "report", "mini", "--out", str(out),
                                     "--gradebook", str(gradebook)])
    assert done.exit_code == 0, done.output
    return out


@pytest.mark.browser
@NO_BROWSER
@NO_AXE
def test_the_class_report_passes_the_audit_and_works_with_the_keyboard_alone(class_report: Path):
    html = class_report.read_text(encoding="utf-8")
    for section in ("leaderboard", "similarity", "history", "overrides", "extensions", "errors", "why-zero"):
        body = html[html.index(f'<section id="{section}">'):]
        assert "<table" in body[:body.index("</section>")], f"the {section} section is empty: nothing audited"
    found = audit(class_report, window=(1366, 2000))
    assert found["passes"] > 20, found
    assert found["violations"] == [], violations_text(found)
    keyboard = found["keyboard"]
    assert keyboard["reachable"] >= 8 and keyboard["no_focus"] == [] and keyboard["no_ring"] == []
    assert keyboard["positive_tabindex"] == [] and keyboard["handlers"] == [] and keyboard["scripts"] == 0
    assert 'alt="Histogram of scores' in html and "<caption>Students per score band</caption>" in html


# ------------------------------------------------------------------ heatmaps without colour
def test_largest_differences_are_numbers_placed_in_the_full_matrix():
    heatmap = {"student": [[0.5, 0.25, 0.0], [float("nan"), 0.1, 0.2]],
               "reference": [[0.5, 0.5, 0.0], [0.3, 0.4, 0.2]], "rows": [4, 6], "cols": [10, 13]}
    assert largest_differences(heatmap, count=3) == [
        {"query": 5, "key": 10, "yours": "NaN", "expected": "0.3", "difference": "NaN"},  # a NaN first
        {"query": 5, "key": 11, "yours": "0.1", "expected": "0.4", "difference": "−0.3"},
        {"query": 4, "key": 11, "yours": "0.25", "expected": "0.5", "difference": "−0.25"},
    ]
    assert largest_differences({"student": [[1.0]], "reference": [[1.0]]}) == []  # equal: nothing to list


# Machado, Oliveira & Fernandes (2009), severity 1: each colour-vision deficiency on linear RGB.
DEFICIENCIES = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}


def _lab(colours, deficiency: str | None = None):
    """CIE L*a*b* of sRGB colours [N, 3] (in [0, 1]), as seen with `deficiency`."""
    import numpy as np

    linear = np.where(colours <= 0.04045, colours / 12.92, ((colours + 0.055) / 1.055) ** 2.4)  # [N, 3]
    if deficiency:
        linear = np.clip(linear @ np.array(DEFICIENCIES[deficiency]).T, 0, 1)
    to_xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = linear @ to_xyz.T / np.array([0.95047, 1.0, 1.08883])  # [N, 3], relative to D65 white
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=-1)


def _samples(name: str, points: list[float]):
    import matplotlib
    import numpy as np

    return np.array([matplotlib.colormaps[name](x)[:3] for x in points])  # [N, 3] sRGB


def test_heatmap_palettes_read_without_colour_vision():
    import numpy as np

    # yours and expected: lightness rises with the value, so the map reads in any vision, even in grey
    lightness = _lab(_samples(VALUES_CMAP, list(np.linspace(0, 1, 65))))[:, 0]
    assert np.all(np.diff(lightness) > 0), VALUES_CMAP
    # the difference: lightness falls from the centre (0) to both ends (the size of a difference), and
    # a positive and a negative difference of the same size stay apart in every deficiency (its sign)
    lightness = _lab(_samples(DIFFERENCE_CMAP, list(np.linspace(0, 1, 65))))[:, 0]
    assert np.all(np.diff(lightness[:33]) > 0) and np.all(np.diff(lightness[32:]) < 0), DIFFERENCE_CMAP
    for deficiency in DEFICIENCIES:
        for size in np.linspace(0.25, 0.5, 6):
            pair = _lab(_samples(DIFFERENCE_CMAP, [0.5 - size, 0.5 + size]), deficiency)
            assert np.linalg.norm(pair[0] - pair[1]) > 25, (DIFFERENCE_CMAP, deficiency, size)


def test_the_palette_check_refuses_a_red_green_map():
    import numpy as np

    pair = _lab(_samples("RdYlGn", [0.0, 1.0]), "deuteranopia")
    assert np.linalg.norm(pair[0] - pair[1]) < 25  # red against green: what the check above keeps out

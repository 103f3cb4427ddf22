"""The HTML report as a student sees it: rendered by a real headless Chromium."""

from __future__ import annotations

import json
import re

import pytest

from grader.core.course import Course
from tests.browser import chromium, render
from tests.conftest import FAULTS, MINI_COURSE, grade_workspace, write_report, write_results

pytestmark = [pytest.mark.browser, pytest.mark.sandbox,
              pytest.mark.skipif(chromium() is None, reason="no Chromium installed (apt-get install chromium)")]

CHECK_IMAGES = """<script>
window.addEventListener('load', () => {
  const images = [...document.querySelectorAll('img.heatmap')];
  document.body.dataset.images = images.map(i => i.complete && i.naturalWidth > 0).join(',');
});
</script></body>"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    course = Course(MINI_COURSE)
    result = grade_workspace(course, "mini", FAULTS / "html_in_output",
                                                   student="eve")
    out = tmp_path_factory.mktemp("report")
    page = write_report(result, out / "report.html", course.templates_dir)
    results = json.loads(write_results(result, out / "results.json").read_text())
    dom, console = render(page)
    probe = out / "probe.html"
    probe.write_text(page.read_text().replace("</body>", CHECK_IMAGES))
    probe_dom, _ = render(probe)
    return result, page, results, dom, console, probe_dom


def test_page_loads_without_console_errors(rendered):
    _, _, _, dom, console, _ = rendered
    assert "<main>" in dom
    assert console == []


def test_total_matches_results_json(rendered):
    result, _, results, dom, _, _ = rendered
    shown = float(re.search(r'id="total" data-total="([0-9.]+)"', dom).group(1))
    assert shown == results["score"] == result.score.total
    assert result.score.total < result.score.max_points  # this submission fails several tasks


def test_heatmaps_are_present_and_decode(rendered):
    *_, probe_dom = rendered
    flags = re.search(r'data-images="([^"]*)"', probe_dom).group(1).split(",")
    assert flags and all(flag == "true" for flag in flags)


def test_no_hidden_test_source_in_the_page(rendered):
    _, page, _, dom, _, _ = rendered
    html = page.read_text()
    for test_file in (MINI_COURSE / "reference/mini/tests").glob("test_*.py"):
        for line in test_file.read_text().splitlines():
            line = line.strip()
            if line.startswith(("check.", "def test_")):
                body = line.removeprefix("def ")
                assert body not in html and body not in dom, body


def test_student_output_is_escaped(rendered):
    _, _, _, dom, _, _ = rendered
    assert "&lt;script&gt;document.title" in dom
    assert "<script>document.title" not in dom
    assert "pwned" not in re.search(r"<title>(.*?)</title>", dom).group(1)


def test_diagnosis_and_lecture_section_shown(rendered):
    _, _, _, dom, _, _ = rendered
    assert "Most likely: normalised over the wrong axis" in dom
    assert "§10" in dom

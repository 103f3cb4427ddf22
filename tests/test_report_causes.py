"""The report groups failures by cause, as a student sees it in a real headless Chromium.

The submission (tests/fixtures/assignment1_two_causes) has two bugs, each behind many failing
tests: `k.T` on batched keys (7 tests raise) and masked scores set to 0 (8 tests give wrong
values). The page must show each cause once, with the tests it explains, and one heatmap per
cause drawn from a slice where the student's weights really differ.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from grader.core.course import Course
from grader.render.report import failure_groups
from tests.browser import chromium, render
from tests.conftest import FIXTURES, ROOT, grade_workspace, write_report

pytestmark = [pytest.mark.browser, pytest.mark.sandbox,
              pytest.mark.skipif(chromium() is None, reason="no Chromium installed (apt-get install chromium)")]

CHECK_IMAGES = """<script>
window.addEventListener('load', () => {
  const images = [...document.querySelectorAll('.cause img.heatmap')];
  document.body.dataset.images = images.map(i => i.complete && i.naturalWidth > 0).join(',');
});
</script></body>"""


class _Causes(HTMLParser):
    """Each task section's cause blocks: {task id: [{"cause", "tests", "heatmaps"}]}."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: dict[str, list[dict]] = {}
        self.task: str | None = None
        self.block: dict | None = None
        self.depth = 0
        self.in_code = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and (attrs.get("id") or "").startswith("task-"):
            self.task = attrs["id"].removeprefix("task-")
            self.tasks[self.task] = []
        if tag == "div" and self.block is not None:
            self.depth += 1
        if tag == "div" and "cause" in (attrs.get("class") or "").split() and self.task:
            self.block = {"cause": attrs.get("data-cause"), "tests": [], "heatmaps": 0}
            self.tasks[self.task].append(self.block)
            self.depth = 1
        if self.block is not None and tag == "img" and "heatmap" in (attrs.get("class") or ""):
            self.block["heatmaps"] += 1
        self.in_code = tag == "code" and self.block is not None

    def handle_endtag(self, tag):
        if tag == "div" and self.block is not None:
            self.depth -= 1
            if self.depth == 0:
                self.block = None
        if tag == "code":
            self.in_code = False

    def handle_data(self, data):
        if self.in_code and self.block is not None:
            self.block["tests"].append(data)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    course = Course(ROOT)
    result = grade_workspace(course, "assignment1", FIXTURES / "assignment1_two_causes",
                                                          student="sample", allow_weak_sandbox=True)
    out = tmp_path_factory.mktemp("report")
    html = write_report(result, out / "report.html", course.templates_dir)
    dom, console = render(html)
    probe = out / "probe.html"
    probe.write_text(html.read_text().replace("</body>", CHECK_IMAGES))
    probe_dom, _ = render(probe)
    parser = _Causes()
    parser.feed(dom)
    return result, dom, console, probe_dom, parser.tasks


def test_one_block_per_cause_listing_the_tests_it_explains(page):
    result, dom, console, _, tasks = page
    assert console == []
    for group in failure_groups(result.outcomes):
        blocks = [b for b in tasks[group.task] if b["cause"] == ":".join(group.key)]
        assert len(blocks) == 1, (group.key, tasks[group.task])
        assert blocks[0]["tests"] == [o.name for o in group.outcomes]
    for task_id, blocks in tasks.items():
        expected = [g for g in failure_groups(result.outcomes) if g.task == task_id]
        assert len(blocks) == len(expected), (task_id, blocks)
    scores = tasks["attention_scores"]
    assert [b["cause"] for b in scores] == ["diagnosis:scores_k_T_batched"] and len(scores[0]["tests"]) == 7
    sdpa = [b for b in tasks["scaled_dot_product_attention"] if b["cause"] == "diagnosis:sdpa_mask_fill_zero"]
    assert len(sdpa) == 1 and len(sdpa[0]["tests"]) == 8
    assert dom.count("Most likely: k.T used on batched keys") == 1
    assert dom.count("Most likely: masked scores set to 0 instead of -inf") == 1


def test_every_failing_test_is_listed_once(page):
    result, dom, _, _, tasks = page
    listed = [name for blocks in tasks.values() for b in blocks for name in b["tests"]]
    failed = [o.name for o in result.outcomes if o.status == "failed"]
    assert sorted(listed) == sorted(failed) and len(set(listed)) == len(listed)


def test_one_heatmap_per_cause_from_a_slice_that_differs(page):
    result, _, _, probe_dom, tasks = page
    assert all(b["heatmaps"] <= 1 for blocks in tasks.values() for b in blocks)
    sdpa = next(b for b in tasks["scaled_dot_product_attention"] if b["cause"] == "diagnosis:sdpa_mask_fill_zero")
    assert sdpa["heatmaps"] == 1
    flags = re.search(r'data-images="([^"]*)"', probe_dom).group(1).split(",")
    assert flags and all(flag == "true" for flag in flags)
    group = next(g for g in failure_groups(result.outcomes) if g.key == ("diagnosis", "sdpa_mask_fill_zero"))
    shown = group.heatmap_outcome().heatmap
    assert shown["student"] != shown["reference"] and shown["max_diff"] > 0.01
    assert shown["max_diff"] == max(o.heatmap["max_diff"] for o in group.outcomes if o.heatmap)

"""The course server in headless Chromium: a student's sign-in link opens their submission's page, whose
status follows the grading live (server-sent events) until the report is ready; the report opens in the
browser; and every page of the site passes the accessibility audit the reports pass (axe-core, WCAG A/AA
and best practices, a focus ring on everything the keyboard reaches)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from serve_client import MINI_ANSWERS, Client, ServerProcess, job_id, serving_copy, signed_in

from tests.browser import AXE_MISSING, FLAGS, audit, axe_core, chromium, violations_text
from tests.conftest import MINI_COURSE, ROOT

pytestmark = [pytest.mark.browser, pytest.mark.sandbox,
              pytest.mark.skipif(chromium() is None, reason="no Chromium installed (apt-get install chromium)")]

REFERENCE = (MINI_COURSE / "reference" / "mini" / "mini.py").read_bytes()
SLOW = REFERENCE.replace(b"import torch\n", b"import time\n\nimport torch\n").replace(
    b"    return x * 2", b"    time.sleep(2)\n    return x * 2")
STATIC = ROOT / "templates" / "serve"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    course = serving_copy(MINI_COURSE, tmp_path_factory.mktemp("serve-browser") / "course")
    process = ServerProcess(course, "--jobs", "1")
    yield process
    process.stop()


def browse(url: str) -> str:
    """The DOM of `url` once Chromium has loaded it and its scripts have finished (a fresh profile)."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([chromium(), *FLAGS[:-1], "--virtual-time-budget=600000", f"--user-data-dir={profile}",
                               "--dump-dom", url], capture_output=True, text=True, timeout=900)
    return done.stdout


def test_the_status_follows_the_grading_live_and_the_report_opens(server):
    alice = signed_in(server, "alice")
    job = job_id(alice.upload("mini", [("mini.py", SLOW), ("answers.toml", MINI_ANSWERS)]))
    first = alice.get(f"/jobs/{job}").body
    assert re.search(r'id="status"[^>]*>(Queued|Being graded)', first), first
    assert 'id="report-link" hidden' in first
    dom = browse(f"{server.link('alice')}&next=/jobs/{job}")  # opened while it is graded: the events update it
    assert re.search(r'id="status"[^>]*>Graded: your report is ready', dom), dom
    assert 'id="report-link" hidden' not in dom and f'href="/jobs/{job}/report"' in dom
    report = browse(f"{server.link('alice')}&next=/jobs/{job}/report")
    assert re.search(r"<title>[^<]*alice[^<]*100\.0/100\.0", report), report[:400]


@pytest.mark.skipif(axe_core() is None, reason=AXE_MISSING)
def test_every_page_passes_the_accessibility_audit(server, tmp_path: Path):
    bea = signed_in(server, "bea")
    job = job_id(bea.upload("mini", [("mini.py", REFERENCE)]))
    bea.events(job)
    staff = signed_in(server, "prof", staff=True)
    pages = {"sign-in": Client(server.url).get("/").body, "home": bea.get("/").body,
             "assignment": bea.get("/a/mini").body, "job": bea.get(f"/jobs/{job}").body,
             "error": bea.get("/jobs/999999").body, "staff": staff.get("/staff").body}
    for name, html in pages.items():
        page = tmp_path / f"{name}.html"
        html = re.sub(r'<input type="hidden"[^>]*>', "", html)  # the CSRF fields: never focused, not a control
        page.write_text(html.replace('href="/static/serve.css"', f'href="{(STATIC / "serve.css").as_uri()}"')
                        .replace('src="/static/status.js"', f'src="{(STATIC / "status.js").as_uri()}"'))
        found = audit(page)
        assert found["violations"] == [], f"{name}: {violations_text(found)}"
        keyboard = found["keyboard"]
        assert keyboard["no_focus"] == [] and keyboard["no_ring"] == [], (name, keyboard)
        assert keyboard["positive_tabindex"] == [] and keyboard["handlers"] == [], (name, keyboard)

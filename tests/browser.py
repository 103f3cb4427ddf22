"""Headless Chromium for the report tests: render a page, read its DOM and console."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"]


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(page: Path, extra: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *extra,
                               page.resolve().as_uri()], capture_output=True, text=True, timeout=600)


def render(page: Path, window: tuple[int, int] | None = None) -> tuple[str, list[str]]:
    """(DOM after load, console error lines); `window`: the viewport (width, height) to lay it out in."""
    done = _run(page, ["--dump-dom", *([f"--window-size={window[0]},{window[1]}"] if window else [])])
    console = [line for line in done.stderr.splitlines()
               if "CONSOLE" in line and ("ERROR" in line or "Uncaught" in line)]
    return done.stdout, console


def screenshot(page: Path, png: Path, width: int = 1000, height: int = 2000) -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    _run(page, [f"--screenshot={png.resolve()}", f"--window-size={width},{height}",
                "--hide-scrollbars"])
    return png


# ------------------------------------------------------------------ accessibility
AXE_ENV = "AXE_CORE_JS"  # where axe.min.js is, when not under the course root's node_modules/
AXE_DEFAULT = Path(__file__).resolve().parent.parent / "node_modules" / "axe-core" / "axe.min.js"
AXE_MISSING = (f"axe-core is not installed: run `npm ci` at the course root (package.json pins it), "
               f"or set {AXE_ENV} to an axe.min.js")

# Appended to a copy of the page: axe-core, then tests/report_audit.js, which opens every <details>,
# visits every element the keyboard reaches, runs axe-core and writes what it found into the page.
AUDIT_SCRIPT = Path(__file__).resolve().parent / "report_audit.js"
AUDIT = '<script data-audit src="{axe}"></script><script data-audit src="{script}"></script></body>'


def axe_core() -> Path | None:
    """axe-core's axe.min.js: $AXE_CORE_JS, else node_modules/ at the course root (`npm ci`)."""
    import os

    path = Path(os.environ.get(AXE_ENV) or AXE_DEFAULT)
    return path if path.is_file() else None


def audit(page: Path, window: tuple[int, int] = (1000, 2000)) -> dict:
    """axe-core's verdict on `page` in headless Chromium, and what the keyboard reaches:
    {"violations": [...], "keyboard": {...}, "passes": n, "version": ...}."""
    import html
    import json
    import re

    probe = page.with_name(page.stem + ".audit.html")
    tags = AUDIT.format(axe=axe_core().as_uri(), script=AUDIT_SCRIPT.as_uri())
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", tags), encoding="utf-8")
    dom, console = render(probe, window)
    found = re.search(r'<pre id="audit-results">(.*?)</pre>', dom, re.S)
    if found is None:
        raise AssertionError(f"the audit did not finish in {page.name}: console {console}")
    data = json.loads(html.unescape(found.group(1)))
    if "error" in data:
        raise AssertionError(f"axe-core failed on {page.name}: {data['error']}")
    return data


def violations_text(found: dict) -> str:
    """axe-core's violations, one line per element, for an assertion message."""
    lines = []
    for violation in found["violations"]:
        for node in violation["nodes"]:
            lines.append(f"{violation['impact']} {violation['id']} ({violation['help']}): {node['target']} "
                         f"{node['html'][:120]} — {(node['summary'] or '').splitlines()[-1:]}")
    return "\n".join(lines)

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

"""The real course server for the tests: `grade serve` started as a process on a free loopback port, and a
small HTTP client (urllib, a cookie jar, multipart uploads as a browser sends them, the status stream)."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 300  # a busy two-core machine imports torch slowly
MINI_ANSWERS = b"row_sum = 1\nratio = 1.43\n"


def grade(course: Path, *args: str, env: dict | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "grader.cli", "--course", str(course), *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


class ServerProcess:
    """`grade serve` on 127.0.0.1 and a free port, for `course` (its output in `log`)."""

    def __init__(self, course: Path, *args: str, env: dict | None = None):
        self.course = course
        self.log = course.parent / f"serve-{uuid.uuid4().hex[:6]}.log"
        self._out = self.log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "grader.cli", "--course", str(course), "serve", "--port", "0", *args],
            stdout=self._out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, start_new_session=True)
        self.url = self._wait_for_url()

    def _wait_for_url(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = re.search(r"on (http://127\.0\.0\.1:\d+)", self.log.read_text())
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                raise AssertionError(f"grade serve exited {self.process.returncode}: {self.log.read_text()}")
            time.sleep(0.2)
        raise AssertionError(f"grade serve did not start: {self.log.read_text()}")

    def link(self, user: str, staff: bool = False) -> str:
        return grade(self.course, "serve-link", user, "--url", self.url, *(["--staff"] if staff else []))

    def kill(self) -> None:
        """SIGKILL the server alone (its pool's workers notice their parent is gone and end)."""
        self.process.kill()
        self.process.wait(timeout=60)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=300)
        self._out.close()


@dataclass
class Reply:
    status: int
    url: str
    body: str
    headers: dict


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


class Client:
    """One browser: its own cookies."""

    def __init__(self, base: str, follow: bool = True):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        handlers = [urllib.request.HTTPCookieProcessor(self.jar)] + ([] if follow else [NoRedirect()])
        self.opener = urllib.request.build_opener(*handlers)

    def request(self, path: str, data: bytes | None = None, headers: dict | None = None) -> Reply:
        url = path if path.startswith("http") else self.base + path
        request = urllib.request.Request(url, data=data, headers=headers or {})
        try:
            with self.opener.open(request, timeout=120) as reply:
                return Reply(reply.status, reply.url, reply.read().decode("utf-8", "replace"), dict(reply.headers))
        except urllib.error.HTTPError as error:
            return Reply(error.code, url, error.read().decode("utf-8", "replace"), dict(error.headers))

    def get(self, path: str) -> Reply:
        return self.request(path)

    def csrf(self, path: str = "/") -> str:
        found = re.search(r'name="csrf" value="([^"]+)"', self.get(path).body)
        assert found, f"no form on {path}"
        return found.group(1)

    def post(self, path: str, fields: dict, files: list[tuple[str, bytes]] = ()) -> Reply:
        boundary = uuid.uuid4().hex
        parts = []
        for name, value in fields.items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
        for filename, data in files:
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{filename}"\r\n'
                         f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        return self.request(path, body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})

    def upload(self, assignment: str, files: list[tuple[str, bytes]], **fields) -> Reply:
        csrf = self.csrf(f"/a/{assignment}")
        return self.post(f"/a/{assignment}/upload", {"csrf": csrf, **fields}, files)

    def events(self, job: int, timeout_s: float = 900) -> list[dict]:
        """The status stream of a job, read to its end (the job done or failed)."""
        request = urllib.request.Request(f"{self.base}/jobs/{job}/events")
        seen = []
        with self.opener.open(request, timeout=timeout_s) as stream:
            for raw in stream:
                line = raw.decode().strip()
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
        return seen


def job_id(reply: Reply) -> int:
    found = re.search(r"/jobs/(\d+)$", reply.url)
    assert found, f"not a job page: {reply.status} {reply.url} {reply.body[-600:]}"
    return int(found.group(1))


def signed_in(server: ServerProcess, user: str, staff: bool = False) -> Client:
    client = Client(server.url)
    reply = client.get(server.link(user, staff))
    assert reply.status == 200, reply.body
    return client


def serving_copy(source: Path, target: Path, serve_toml: str = "") -> Path:
    """A copy of a course whose deadlines are far ahead (so full marks are full), with `serve_toml` as its
    course.toml's [serve] table."""
    import shutil

    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".grade", "node_modules", ".git", "__pycache__"))
    for manifest in (target / "assignments").glob("*/assignment.toml"):
        text = manifest.read_text()
        manifest.write_text(re.sub(r'(?m)^deadline = "\d{4}', 'deadline = "2099', text))
    if serve_toml:
        settings = target / "course.toml"
        before = settings.read_text() if settings.exists() else ""
        settings.write_text(before + "\n[serve]\n" + serve_toml)
    return target

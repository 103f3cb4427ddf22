"""A small JSON-over-HTTPS client (the standard library's), for the LMS's endpoints.

Every request has a timeout; an answer is returned whatever its status (the caller decides what a
status means), and a network failure is an LmsError naming the URL."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from grader.core.errors import LmsError

TIMEOUT_S = 30


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> object:
        try:
            return json.loads(self.body.decode("utf-8") or "null")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise LmsError(f"the LMS answered with something that is not JSON ({exc})") from exc

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    def header(self, name: str) -> str:
        return self.headers.get(name.lower(), "")

    def next_link(self) -> str:
        """The rel="next" URL of a Link header (NRPS and Canvas page their lists this way), or ''."""
        for part in self.header("link").split(","):
            pieces = part.split(";")
            if len(pieces) > 1 and any(p.strip().replace(" ", "") in ('rel="next"', "rel=next") for p in pieces[1:]):
                return pieces[0].strip().strip("<>")
        return ""


def request(method: str, url: str, *, headers: dict[str, str] | None = None, body: object = None,
            form: dict[str, str] | None = None, timeout: float = TIMEOUT_S) -> Answer:
    """One HTTP request: `body` sent as JSON, or `form` as application/x-www-form-urlencoded."""
    data = None
    sent = dict(headers or {})
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        sent.setdefault("Content-Type", "application/x-www-form-urlencoded")
    elif body is not None:
        data = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise LmsError(f"not an http(s) URL: {url!r}")
    prepared = urllib.request.Request(url, data=data, headers=sent, method=method)
    try:
        with urllib.request.urlopen(prepared, timeout=timeout) as answer:  # noqa: S310 (scheme checked above)
            return Answer(answer.status, answer.read(), {k.lower(): v for k, v in answer.headers.items()})
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read() or b"", {k.lower(): v for k, v in (exc.headers or {}).items()})
    except (urllib.error.URLError, OSError) as exc:
        raise LmsError(f"{method} {url}: the LMS could not be reached ({getattr(exc, 'reason', exc)})") from exc

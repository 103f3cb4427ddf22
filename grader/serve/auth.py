"""Who is signed in: the server's signing key, staff-issued sign-in links, sessions and CSRF tokens.

The key is a random file under the course's state folder (`.grade/serve/signing.key`, mode 0600): never
in the gradebook or the repository, and never readable by a grading worker (the server protects the
folder). Sign-in links and session cookies are signed with it (itsdangerous) and expire: a link after
`link_hours`, a session after `session_hours` (course.toml's [serve]). A session carries the student's
id, their role and a CSRF token that every form posts back; the id is never read from a request's body.
Deleting the key file signs everyone out and voids every link.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from grader.core.errors import GraderError
from grader.core.student_ids import check_student_id

KEY_FILE = "signing.key"
ROLES = ("student", "staff")
_LINK_SALT = "grade-serve sign-in link"
_SESSION_SALT = "grade-serve session"


def serve_dir(state_dir: Path) -> Path:
    """The server's own folder under the course's state folder (the key, uploads being graded)."""
    return Path(state_dir) / "serve"


def signing_key(state_dir: Path) -> bytes:
    """The course server's key, made (32 random bytes, owner-only) on first use."""
    folder = serve_dir(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    path = folder / KEY_FILE
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_bytes()
        if len(key) < 32:
            raise GraderError(f"{path} is not a signing key (too short): delete it to make a new one "
                              f"(every link and session is then void)") from None
        return key
    key = secrets.token_bytes(32)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(key)
    return key


@dataclass(frozen=True)
class Session:
    """A signed-in user: their id, their role (student or staff) and the CSRF token of their forms."""

    user: str
    role: str
    csrf: str

    @property
    def staff(self) -> bool:
        return self.role == "staff"

    def form_ok(self, token: str | None) -> bool:
        """Whether a posted form's CSRF token is this session's."""
        return bool(token) and hmac.compare_digest(str(token), self.csrf)


class Signer:
    """Signs and checks links and session cookies with the course's key."""

    def __init__(self, key: bytes, link_hours: int, session_hours: int):
        self._links = URLSafeTimedSerializer(key, salt=_LINK_SALT)
        self._sessions = URLSafeTimedSerializer(key, salt=_SESSION_SALT)
        self.link_s = link_hours * 3600
        self.session_s = session_hours * 3600

    def link_token(self, user: str, role: str = "student") -> str:
        """A sign-in token for `user` (a valid student id) as `role`."""
        if role not in ROLES:
            raise GraderError(f"unknown role {role!r} (choose one of {', '.join(ROLES)})")
        check_student_id(user, "sign-in link for", fix="pass the student's id")
        return self._links.dumps({"u": user, "r": role})

    def open_link(self, token: str) -> tuple[str, str] | None:
        """(user, role) of a valid, unexpired sign-in token; None otherwise."""
        try:
            data = self._links.loads(token, max_age=self.link_s)
        except (BadSignature, SignatureExpired, ValueError, TypeError):
            return None
        return _checked(data)

    def session_cookie(self, user: str, role: str) -> str:
        """A new session's cookie value (a fresh CSRF token)."""
        return self._sessions.dumps({"u": user, "r": role, "c": secrets.token_urlsafe(24)})

    def open_session(self, cookie: str | None) -> Session | None:
        """The session of a valid, unexpired cookie; None otherwise."""
        if not cookie:
            return None
        try:
            data = self._sessions.loads(cookie, max_age=self.session_s)
        except (BadSignature, SignatureExpired, ValueError, TypeError):
            return None
        checked = _checked(data)
        if checked is None or not isinstance(data.get("c"), str):
            return None
        return Session(checked[0], checked[1], data["c"])


def _checked(data: object) -> tuple[str, str] | None:
    if not isinstance(data, dict) or data.get("r") not in ROLES or not isinstance(data.get("u"), str):
        return None
    try:
        check_student_id(data["u"], "signed-in user")
    except GraderError:
        return None
    return data["u"], data["r"]

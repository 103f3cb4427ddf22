"""The course's LMS settings: course.toml's [lms] table, read once at the edge.

    [lms]
    issuer = "https://canvas.instructure.com"       # the platform (LTI 1.3)
    client_id = "10000000000042"
    deployment_ids = ["1:8865aa05b4b79b64a91a86042e43af5ea8ae79eb"]
    auth_login_url = "https://canvas.example.edu/api/lti/authorize_redirect"
    auth_token_url = "https://canvas.example.edu/login/oauth2/token"
    keyset_url = "https://canvas.example.edu/api/lti/security/jwks"
    tool_url = "https://grader.example.edu"         # where `grade serve` is reached
    tool_key = ".grade/lti/tool-key.pem"            # the tool's private key (`grade lms key` makes it)
    lineitems_url = "..."       # optional: AGS line items of the course (else the last launch's)
    memberships_url = "..."     # optional: NRPS memberships of the course (else the last launch's)
    match = "sis"               # how an LMS user is tied to the roster: sis, login or email

    [lms.canvas]                # Canvas's REST API, where LTI is not set up
    base_url = "https://canvas.example.edu"
    course_id = 1234
    token_file = "~/.config/canvas-token"            # a staff access token, in a file of its own
    assignments = { assignment1 = 5678 }             # Canvas's assignment id of each course assignment

Relative paths are relative to the course root. A missing or malformed setting is a one-line LmsError.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.errors import LmsError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

MATCHES = ("sis", "login", "email")


@dataclass(frozen=True)
class CanvasConfig:
    base_url: str
    course_id: str
    token_file: Path
    assignments: dict[str, str] = field(default_factory=dict)

    def token(self) -> str:
        try:
            token = self.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise LmsError(f"cannot read the Canvas token file {self.token_file}: {exc.strerror}") from exc
        if not token:
            raise LmsError(f"the Canvas token file {self.token_file} is empty")
        return token

    def assignment(self, assignment_id: str) -> str:
        if assignment_id not in self.assignments:
            raise LmsError(f"[lms.canvas] assignments has no Canvas id for {assignment_id!r} "
                           f"(add {assignment_id} = <id> to course.toml)")
        return self.assignments[assignment_id]


@dataclass(frozen=True)
class LtiConfig:
    issuer: str
    client_id: str
    deployment_ids: tuple[str, ...]
    auth_login_url: str
    auth_token_url: str
    keyset_url: str
    tool_url: str
    tool_key: Path
    lineitems_url: str = ""
    memberships_url: str = ""
    match: str = "sis"

    @property
    def launch_url(self) -> str:
        return self.tool_url.rstrip("/") + "/lti/launch"

    @property
    def login_url(self) -> str:
        return self.tool_url.rstrip("/") + "/lti/login"


@dataclass(frozen=True)
class LmsConfig:
    lti: LtiConfig | None
    canvas: CanvasConfig | None

    @property
    def platform(self) -> str:
        """The key the gradebook files LMS rows under: the LTI issuer, or canvas:<base url>."""
        if self.lti is not None:
            return self.lti.issuer
        if self.canvas is not None:
            return f"canvas:{self.canvas.base_url}"
        return ""


def _text(table: dict, key: str, where: str, required: bool = True) -> str:
    value = table.get(key, "")
    if not isinstance(value, (str, int)) or (required and value == ""):
        raise LmsError(f"course.toml {where}.{key} must be {'a non-empty' if required else 'a'} string")
    return str(value)


def _path(root: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else root / path


def parse(table: dict, root: Path) -> LmsConfig:
    """The [lms] table of course.toml (already parsed) → LmsConfig; LmsError on a malformed one."""
    if not isinstance(table, dict):
        raise LmsError("course.toml [lms] must be a table")
    lti = None
    if "issuer" in table:
        deployments = table.get("deployment_ids", [])
        if not isinstance(deployments, list) or not deployments or not all(isinstance(d, str) for d in deployments):
            raise LmsError("course.toml [lms].deployment_ids must be a non-empty list of strings")
        match = _text(table, "match", "[lms]", required=False) or "sis"
        if match not in MATCHES:
            raise LmsError(f"course.toml [lms].match must be one of {', '.join(MATCHES)}, not {match!r}")
        lti = LtiConfig(issuer=_text(table, "issuer", "[lms]"), client_id=_text(table, "client_id", "[lms]"),
                        deployment_ids=tuple(deployments),
                        auth_login_url=_text(table, "auth_login_url", "[lms]"),
                        auth_token_url=_text(table, "auth_token_url", "[lms]"),
                        keyset_url=_text(table, "keyset_url", "[lms]"),
                        tool_url=_text(table, "tool_url", "[lms]"),
                        tool_key=_path(root, _text(table, "tool_key", "[lms]", required=False)
                                       or ".grade/lti/tool-key.pem"),
                        lineitems_url=_text(table, "lineitems_url", "[lms]", required=False),
                        memberships_url=_text(table, "memberships_url", "[lms]", required=False),
                        match=match)
    canvas = None
    if "canvas" in table:
        raw = table["canvas"]
        if not isinstance(raw, dict):
            raise LmsError("course.toml [lms.canvas] must be a table")
        assignments = raw.get("assignments", {})
        if not isinstance(assignments, dict):
            raise LmsError("course.toml [lms.canvas].assignments must be a table of assignment = canvas id")
        canvas = CanvasConfig(base_url=_text(raw, "base_url", "[lms.canvas]").rstrip("/"),
                              course_id=_text(raw, "course_id", "[lms.canvas]"),
                              token_file=_path(root, _text(raw, "token_file", "[lms.canvas]")),
                              assignments={str(k): str(v) for k, v in assignments.items()})
    return LmsConfig(lti, canvas)


def load(course_root: Path) -> LmsConfig:
    """The course's LMS settings; LmsError when course.toml has no [lms] table or a malformed one."""
    path = Path(course_root) / "course.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise LmsError(f"cannot read {path}: {exc}") from exc
    if "lms" not in data:
        raise LmsError(f"{path} has no [lms] table: the LMS link is not set up (docs/LMS.md)")
    return parse(data["lms"], Path(course_root))


def load_optional(course_root: Path) -> LmsConfig | None:
    """The course's LMS settings, or None when course.toml has no [lms] table (LmsError: a malformed one)."""
    path = Path(course_root) / "course.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, tomllib.TOMLDecodeError):
        return None  # the course's settings loader says what is wrong with the file
    return parse(data["lms"], Path(course_root)) if "lms" in data else None

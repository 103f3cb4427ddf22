"""LTI 1.3 launches as sign-in to `grade serve`: OIDC login initiation, then the platform's signed
id_token checked (signature against the platform's published keys, issuer, audience and authorised
party, deployment, nonce, state, expiry, message type and version), the roles mapped to student or
staff, and the LMS user tied to the roster. A launch from an assignment's link opens that assignment.

Every refusal is a LaunchRefused with a one-line reason the server shows on a clean page."""

from __future__ import annotations

import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass

import jwt

from grader.core.errors import LaunchRefused, LmsError
from grader.lms import http
from grader.lms.config import LtiConfig
from grader.storage.gradebook import Gradebook

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_ENDPOINT = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
STAFF_ROLES = ("Instructor", "TeachingAssistant", "Administrator", "ContentDeveloper", "Mentor")
LEEWAY_S = 60  # clock skew allowed between the platform and this server


@dataclass(frozen=True)
class LoginRedirect:
    """Where the browser goes next (the platform's authorisation endpoint) and the state to keep."""

    url: str
    state: str


@dataclass(frozen=True)
class Launch:
    """A checked launch: who signed in, as what, and where they were going."""

    role: str  # "student" or "staff"
    lms_user_id: str  # the id_token's `sub`
    student_id: str | None  # the roster's id (students), None for staff
    name: str
    email: str
    assignment_id: str | None  # the assignment the link opens, if it names one


class PlatformKeys:
    """The platform's public keys (its JWKS), fetched when a key id is not known yet (keys rotate),
    at most once a minute."""

    def __init__(self, keyset_url: str):
        self.keyset_url = keyset_url
        self._keys: dict[str, object] = {}
        self._fetched = 0.0
        self._lock = threading.Lock()

    def key(self, kid: str | None) -> object:
        with self._lock:
            if kid not in self._keys and time.monotonic() - self._fetched > 60:
                self._refresh()
            if kid in self._keys:
                return self._keys[kid]
            if kid is None and len(self._keys) == 1:
                return next(iter(self._keys.values()))
        raise LaunchRefused("the launch is signed with a key the platform does not publish (a forged launch?)")

    def _refresh(self) -> None:
        self._fetched = time.monotonic()
        answer = http.request("GET", self.keyset_url, headers={"Accept": "application/json"})
        if not answer.ok:
            raise LmsError(f"the platform's keys ({self.keyset_url}) answered HTTP {answer.status}")
        data = answer.json()
        keys = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(keys, list):
            raise LmsError(f"the platform's keys ({self.keyset_url}) are not a JWKS")
        found = {}
        for jwk in keys:
            try:
                found[jwk.get("kid")] = jwt.PyJWK(jwk).key
            except (jwt.PyJWKError, AttributeError, TypeError):
                continue
        self._keys = found


def login_redirect(config: LtiConfig, params: dict[str, str], book: Gradebook) -> LoginRedirect:
    """Answer the platform's OIDC login initiation: a fresh state and nonce, kept single-use in the
    gradebook, and the authorisation URL the browser is sent to."""
    if params.get("iss") != config.issuer:
        raise LaunchRefused(f"a login from an unknown platform ({params.get('iss')!r}); this course trusts "
                            f"{config.issuer}")
    if params.get("client_id") and params["client_id"] != config.client_id:
        raise LaunchRefused("a login for another tool (its client_id is not this course's)")
    if not params.get("login_hint"):
        raise LaunchRefused("the platform's login request has no login_hint")
    state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    book.issue_lti_state(state, nonce)
    query = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
             "client_id": config.client_id, "redirect_uri": config.launch_url, "login_hint": params["login_hint"],
             "state": state, "nonce": nonce}
    if params.get("lti_message_hint"):
        query["lti_message_hint"] = params["lti_message_hint"]
    separator = "&" if "?" in config.auth_login_url else "?"
    return LoginRedirect(config.auth_login_url + separator + urllib.parse.urlencode(query), state)


def _roles(claims: dict) -> str:
    roles = claims.get(LTI + "roles") or []
    if not isinstance(roles, list):
        raise LaunchRefused("the launch's roles claim is not a list")
    names = {str(role).rsplit("#", 1)[-1].rsplit("/", 1)[-1] for role in roles}
    if names & set(STAFF_ROLES):
        return "staff"
    if "Learner" in names or "Student" in names:
        return "student"
    raise LaunchRefused("the launch gives no role this course knows (learner, instructor or teaching assistant)")


def roster_student(book: Gradebook, match: str, claims: dict) -> str:
    """The roster id of the LMS user in `claims`, matched as course.toml's [lms].match says."""
    roster = book.roster()
    if match == "sis":
        wanted = str((claims.get(LTI + "lis") or {}).get("person_sourcedid") or "")
        found = [entry.id for entry in roster if wanted and entry.id == wanted]
    elif match == "login":
        custom = claims.get(LTI + "custom") or {}
        wanted = str(custom.get("login") or claims.get("preferred_username") or "")
        found = [entry.id for entry in roster if wanted and entry.id == wanted]
    else:
        wanted = str(claims.get("email") or "").lower()
        found = [entry.id for entry in roster if wanted and (entry.email or "").lower() == wanted]
    if len(found) != 1:
        raise LaunchRefused(f"you are not on this course's roster (matched by {match}: {wanted or 'nothing sent'}); "
                            "ask the course staff to add you")
    return found[0]


def _assignment(claims: dict, known: tuple[str, ...]) -> str | None:
    custom = claims.get(LTI + "custom") or {}
    named = custom.get("assignment") if isinstance(custom, dict) else None
    if not named:
        target = urllib.parse.urlsplit(str(claims.get(LTI + "target_link_uri") or "")).path.rstrip("/")
        named = target.rsplit("/", 1)[-1] if "/assignments/" in target else None
    return named if named in known else None


def check_launch(config: LtiConfig, keys: PlatformKeys, book: Gradebook, id_token: str, posted_state: str,
                 browser_state: str, assignments: tuple[str, ...]) -> Launch:
    """Check a launch (the form the platform posted, and the state this browser was given at login)."""
    if not id_token:
        raise LaunchRefused("the launch carries no id_token")
    if not posted_state or not secrets.compare_digest(posted_state, browser_state or ""):
        raise LaunchRefused("the launch's state is not the one this browser was given (a forged or replayed "
                            "launch, or cookies blocked); launch again from the LMS")
    try:
        header = jwt.get_unverified_header(id_token)
    except jwt.PyJWTError as exc:
        raise LaunchRefused(f"the id_token is not a JWT ({exc})") from exc
    if header.get("alg") != "RS256":
        raise LaunchRefused(f"the id_token is signed with {header.get('alg')!r}; LTI 1.3 requires RS256")
    key = keys.key(header.get("kid"))
    try:
        claims = jwt.decode(id_token, key, algorithms=["RS256"], audience=config.client_id, issuer=config.issuer,
                            leeway=LEEWAY_S, options={"require": ["exp", "iat", "iss", "aud", "sub", "nonce"]})
    except jwt.ExpiredSignatureError as exc:
        raise LaunchRefused("the launch has expired; launch again from the LMS") from exc
    except jwt.InvalidAudienceError as exc:
        raise LaunchRefused("the launch is meant for another tool (wrong audience)") from exc
    except jwt.InvalidIssuerError as exc:
        raise LaunchRefused("the launch comes from a platform this course does not trust (wrong issuer)") from exc
    except jwt.InvalidSignatureError as exc:
        raise LaunchRefused("the launch's signature does not verify (a forged launch)") from exc
    except jwt.PyJWTError as exc:
        raise LaunchRefused(f"the launch's id_token is not valid ({exc})") from exc
    audience = claims["aud"]
    if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != config.client_id:
        raise LaunchRefused("the launch names several audiences and this tool is not its authorised party")
    if claims.get(LTI + "deployment_id") not in config.deployment_ids:
        raise LaunchRefused("the launch comes from a deployment this course does not know")
    if claims.get(LTI + "version") != "1.3.0":
        raise LaunchRefused("the launch is not LTI 1.3.0")
    if claims.get(LTI + "message_type") != "LtiResourceLinkRequest":
        raise LaunchRefused(f"a {claims.get(LTI + 'message_type')!r} message is not a launch this tool takes")
    why = book.use_lti_state(posted_state, str(claims["nonce"]))
    if why:
        raise LaunchRefused(why)
    role = _roles(claims)
    student = roster_student(book, config.match, claims) if role == "student" else None
    if student is not None:
        book.link_lms_user(config.issuer, str(claims["sub"]), student)
    ags = claims.get(AGS_ENDPOINT) or {}
    if isinstance(ags, dict) and ags.get("lineitems"):
        book.set_lms_endpoint(config.issuer, "lineitems", str(ags["lineitems"]))
    nrps = claims.get(NRPS_CLAIM) or {}
    if isinstance(nrps, dict) and nrps.get("context_memberships_url"):
        book.set_lms_endpoint(config.issuer, "memberships", str(nrps["context_memberships_url"]))
    return Launch(role=role, lms_user_id=str(claims["sub"]), student_id=student, name=str(claims.get("name") or ""),
                  email=str(claims.get("email") or ""), assignment_id=_assignment(claims, assignments))

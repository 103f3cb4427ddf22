"""The platform's services over LTI 1.3: Assignment and Grade Services (a line item per assignment,
scores) and Names and Role Provisioning Services (the course's members), each call authorised by an
OAuth2 client-credentials token that the tool asks for with a JWT signed by its own key."""

from __future__ import annotations

import time
import urllib.parse
import uuid
from dataclasses import dataclass

import jwt

from grader.core.errors import LmsError
from grader.lms import http
from grader.lms.config import LtiConfig
from grader.lms.keys import key_id, load_key

SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_MEMBERS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
MEMBERS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
MAX_PAGES = 1000


@dataclass(frozen=True)
class Member:
    """One person of the course as the LMS lists them."""

    lms_user_id: str
    name: str
    email: str
    sis_id: str
    login: str
    learner: bool  # a student (not staff)
    active: bool = True


class PlatformServices:
    def __init__(self, config: LtiConfig):
        self.config = config
        self._key = None
        self._tokens: dict[str, tuple[str, float]] = {}  # scopes → (token, expires at)

    def token(self, *scopes: str) -> str:
        wanted = " ".join(sorted(scopes))
        cached = self._tokens.get(wanted)
        if cached and cached[1] > time.time() + 30:
            return cached[0]
        if self._key is None:
            self._key = load_key(self.config.tool_key)
        now = int(time.time())
        assertion = jwt.encode({"iss": self.config.client_id, "sub": self.config.client_id,
                                "aud": self.config.auth_token_url, "iat": now, "exp": now + 300,
                                "jti": uuid.uuid4().hex}, self._key, algorithm="RS256",
                               headers={"kid": key_id(self._key)})
        answer = http.request("POST", self.config.auth_token_url, form={
            "grant_type": "client_credentials",
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": assertion, "scope": wanted})
        data = answer.json() if answer.ok else {}
        if not answer.ok or not isinstance(data, dict) or not data.get("access_token"):
            raise LmsError(f"the platform refused the tool's token request (HTTP {answer.status}); check the "
                           "tool's registration (client id, public key)")
        self._tokens[wanted] = (str(data["access_token"]), time.time() + float(data.get("expires_in", 3600)))
        return self._tokens[wanted][0]

    def _call(self, method: str, url: str, scopes: tuple[str, ...], **kwargs) -> http.Answer:
        headers = {"Authorization": f"Bearer {self.token(*scopes)}", **kwargs.pop("headers", {})}
        return http.request(method, url, headers=headers, **kwargs)

    # ------------------------------------------------------------ AGS
    def find_line_item(self, lineitems_url: str, resource_id: str) -> str:
        """The line item whose resourceId is `resource_id`, or ''."""
        parts = urllib.parse.urlsplit(lineitems_url)
        query = urllib.parse.urlencode([*urllib.parse.parse_qsl(parts.query), ("resource_id", resource_id)])
        url = urllib.parse.urlunsplit(parts._replace(query=query))
        for _ in range(MAX_PAGES):
            answer = self._call("GET", url, (SCOPE_LINEITEM,), headers={"Accept": LINEITEMS_TYPE})
            if not answer.ok:
                raise LmsError(f"listing the line items answered HTTP {answer.status}")
            items = answer.json()
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict) and item.get("resourceId") == resource_id and item.get("id"):
                    return str(item["id"])
            url = answer.next_link()
            if not url:
                return ""
        return ""

    def create_line_item(self, lineitems_url: str, resource_id: str, label: str, maximum: float) -> str:
        answer = self._call("POST", lineitems_url, (SCOPE_LINEITEM,),
                            headers={"Content-Type": LINEITEM_TYPE, "Accept": LINEITEM_TYPE},
                            body={"scoreMaximum": maximum, "label": label, "resourceId": resource_id, "tag": "grade"})
        item = answer.json() if answer.ok else None
        if not isinstance(item, dict) or not item.get("id"):
            raise LmsError(f"creating the line item for {resource_id} answered HTTP {answer.status}")
        return str(item["id"])

    def send_score(self, line_item_url: str, lms_user_id: str, score: float, maximum: float, comment: str = "") -> None:
        parts = urllib.parse.urlsplit(line_item_url)
        url = urllib.parse.urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))
        body = {"userId": lms_user_id, "scoreGiven": score, "scoreMaximum": maximum,
                "activityProgress": "Completed", "gradingProgress": "FullyGraded",
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())}
        if comment:
            body["comment"] = comment
        answer = self._call("POST", url, (SCOPE_SCORE,), headers={"Content-Type": SCORE_TYPE}, body=body)
        if not answer.ok:
            raise LmsError(f"the platform refused the score (HTTP {answer.status})")

    # ------------------------------------------------------------ NRPS
    def members(self, memberships_url: str) -> list[Member]:
        found: list[Member] = []
        url = memberships_url
        for _ in range(MAX_PAGES):
            answer = self._call("GET", url, (SCOPE_MEMBERS,), headers={"Accept": MEMBERS_TYPE})
            if not answer.ok:
                raise LmsError(f"the platform's member list answered HTTP {answer.status}")
            data = answer.json()
            for member in (data.get("members") or []) if isinstance(data, dict) else []:
                roles = {str(r).rsplit("#", 1)[-1].rsplit("/", 1)[-1] for r in member.get("roles") or []}
                found.append(Member(lms_user_id=str(member.get("user_id") or ""), name=str(member.get("name") or ""),
                                    email=str(member.get("email") or ""),
                                    sis_id=str(member.get("lis_person_sourcedid") or ""),
                                    login=str(member.get("ext_user_username") or member.get("login_id") or ""),
                                    learner="Learner" in roles,
                                    active=str(member.get("status") or "Active") == "Active"))
            url = answer.next_link()
            if not url:
                break
        return found

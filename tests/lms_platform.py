"""A mock LMS on loopback that speaks the real protocols, for the LMS tests: an LTI 1.3 platform (its
own RSA key and JWKS, signed launches, an OIDC authorisation endpoint, OAuth2 client credentials that
check the tool's signed assertion against the tool's registered key, AGS line items and scores, NRPS
members, paged) and Canvas's REST API (users, paged; grades; a leaky-bucket rate limit). It records what
it receives, and can be told to fail the next N score posts or rate-limit the next N Canvas calls."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
LEARNER = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class MockPlatform:
    """Start with `with MockPlatform(client_id=...) as platform:`; `platform.url` is its base URL."""

    def __init__(self, client_id: str = "tool-client-1", deployment_id: str = "deploy-1"):
        self.client_id = client_id
        self.deployment_id = deployment_id
        self.key = new_key()
        self.kid = "platform-key-1"
        self.tool_jwks: dict = {}  # the tool's public keys, given at registration
        self.members: list[dict] = []
        self.canvas_users: list[dict] = []
        self.line_items: list[dict] = []
        self.scores: list[dict] = []  # every score the platform accepted
        self.canvas_grades: list[dict] = []
        self.token_requests: list[dict] = []
        self.fail_scores = 0  # answer the next N score posts with HTTP 500
        self.canvas_rate_limited = 0  # answer the next N Canvas calls with 403 Rate Limit Exceeded
        self.canvas_token = "canvas-staff-token"
        self.tokens: set[str] = set()
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.issuer = self.url

    def __enter__(self) -> MockPlatform:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------ what tests configure
    def lms_table(self, tool_url: str, tool_key: str) -> dict:
        """The course.toml [lms] table that registers the tool with this platform."""
        return {"issuer": self.issuer, "client_id": self.client_id, "deployment_ids": [self.deployment_id],
                "auth_login_url": f"{self.url}/auth", "auth_token_url": f"{self.url}/token",
                "keyset_url": f"{self.url}/jwks", "tool_url": tool_url, "tool_key": tool_key,
                "lineitems_url": f"{self.url}/lineitems", "memberships_url": f"{self.url}/memberships", "match": "sis",
                "canvas": {"base_url": self.url, "course_id": "77", "token_file": "canvas-token",
                           "assignments": {"mini": "501"}}}

    def id_token(self, sub: str, *, roles: tuple[str, ...] = (LEARNER,), nonce: str = "n", sis: str = "",
                 email: str = "", aud: object = None, iss: str | None = None, expires_in: int = 300,
                 deployment: str | None = None, key: rsa.RSAPrivateKey | None = None, kid: str | None = None,
                 assignment: str = "", message_type: str = "LtiResourceLinkRequest") -> str:
        now = int(time.time())
        claims = {"iss": iss or self.issuer, "aud": self.client_id if aud is None else aud, "sub": sub,
                  "iat": now, "exp": now + expires_in, "nonce": nonce, "name": f"User {sub}", "email": email,
                  LTI + "deployment_id": deployment or self.deployment_id, LTI + "version": "1.3.0",
                  LTI + "message_type": message_type, LTI + "roles": list(roles),
                  LTI + "lis": {"person_sourcedid": sis},
                  LTI + "resource_link": {"id": "link-1"},
                  LTI + "custom": {"assignment": assignment} if assignment else {},
                  "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {"lineitems": f"{self.url}/lineitems"},
                  "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                      "context_memberships_url": f"{self.url}/memberships"}}
        return jwt.encode(claims, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    # ------------------------------------------------------------ the server
    def _handler(self):
        platform = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, body: object = None, headers: dict | None = None,
                      content_type: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _authorised(self) -> bool:
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                return token in platform.tokens

            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parts.query))
                if parts.path == "/jwks":
                    jwk = json.loads(RSAAlgorithm.to_jwk(platform.key.public_key()))
                    jwk.update({"kid": platform.kid, "alg": "RS256", "use": "sig"})
                    return self._send(200, {"keys": [jwk]})
                if parts.path == "/auth":  # OIDC authorisation: answer with the launch form for the hinted user
                    user = next((m for m in platform.members if m["user_id"] == query.get("login_hint")), None)
                    if user is None or query.get("client_id") != platform.client_id:
                        return self._send(400, {"error": "unknown user or client"})
                    roles = tuple(user.get("roles") or (LEARNER,))
                    token = platform.id_token(user["user_id"], roles=roles, nonce=query.get("nonce", ""),
                                              sis=user.get("lis_person_sourcedid", ""), email=user.get("email", ""),
                                              assignment=query.get("lti_message_hint", ""))
                    form = (f'<form method="post" action="{query["redirect_uri"]}">'
                            f'<input name="id_token" value="{token}"><input name="state" value="{query["state"]}">'
                            "</form>")
                    return self._send(200, form.encode(), content_type="text/html")
                if parts.path == "/lineitems":
                    if not self._authorised():
                        return self._send(401, {"error": "no token"})
                    items = [i for i in platform.line_items
                             if "resource_id" not in query or i["resourceId"] == query["resource_id"]]
                    return self._send(200, items)
                if parts.path == "/memberships":
                    if not self._authorised():
                        return self._send(401, {"error": "no token"})
                    page = int(query.get("page", "0"))
                    chunk = platform.members[page * 2:page * 2 + 2]
                    headers = {}
                    if (page + 1) * 2 < len(platform.members):
                        headers["Link"] = f'<{platform.url}/memberships?page={page + 1}>; rel="next"'
                    return self._send(200, {"id": "ctx", "members": chunk}, headers)
                if parts.path.startswith("/api/v1/courses/77/users"):
                    if not self._canvas_ok():
                        return None
                    page = int(query.get("page", "0"))
                    chunk = platform.canvas_users[page * 2:page * 2 + 2]
                    headers = {"X-Rate-Limit-Remaining": "500"}
                    if (page + 1) * 2 < len(platform.canvas_users):
                        headers["Link"] = (f'<{platform.url}/api/v1/courses/77/users?page={page + 1}>; rel="next", '
                                           f'<{platform.url}/api/v1/courses/77/users?page=0>; rel="first"')
                    return self._send(200, chunk, headers)
                return self._send(404, {"error": "not found"})

            def _canvas_ok(self) -> bool:
                if self.headers.get("Authorization") != f"Bearer {platform.canvas_token}":
                    self._send(401, {"errors": [{"message": "Invalid access token."}]})
                    return False
                with platform.lock:
                    if platform.canvas_rate_limited > 0:
                        platform.canvas_rate_limited -= 1
                        self._send(403, b"403 Forbidden (Rate Limit Exceeded)", {"X-Rate-Limit-Remaining": "0"},
                                   content_type="text/plain")
                        return False
                return True

            def do_POST(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                body = self._body()
                if parts.path == "/token":
                    form = dict(urllib.parse.parse_qsl(body.decode()))
                    platform.token_requests.append(form)
                    try:
                        header = jwt.get_unverified_header(form["client_assertion"])
                        jwk = next(k for k in platform.tool_jwks.get("keys", []) if k["kid"] == header.get("kid"))
                        jwt.decode(form["client_assertion"], jwt.PyJWK(jwk).key, algorithms=["RS256"],
                                   audience=f"{platform.url}/token", issuer=platform.client_id)
                    except (KeyError, StopIteration, jwt.PyJWTError):
                        return self._send(401, {"error": "invalid_client"})
                    token = uuid.uuid4().hex
                    platform.tokens.add(token)
                    return self._send(200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600,
                                            "scope": form.get("scope", "")})
                if not self._authorised():
                    return self._send(401, {"error": "no token"})
                if parts.path == "/lineitems":
                    item = json.loads(body)
                    item["id"] = f"{platform.url}/lineitems/{len(platform.line_items) + 1}"
                    platform.line_items.append(item)
                    return self._send(201, item)
                if parts.path.startswith("/lineitems/") and parts.path.endswith("/scores"):
                    with platform.lock:
                        if platform.fail_scores > 0:
                            platform.fail_scores -= 1
                            return self._send(500, {"error": "try again"})
                        score = json.loads(body)
                        score["lineitem"] = parts.path.removesuffix("/scores")
                        platform.scores.append(score)
                    return self._send(200, {})
                return self._send(404, {"error": "not found"})

            def do_PUT(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                body = self._body()
                if parts.path.startswith("/api/v1/courses/77/assignments/") and "/submissions/" in parts.path:
                    if not self._canvas_ok():
                        return None
                    form = dict(urllib.parse.parse_qsl(body.decode()))
                    user = parts.path.rsplit("/", 1)[-1]
                    assignment = parts.path.split("/assignments/")[1].split("/")[0]
                    platform.canvas_grades.append({"user": user, "assignment": assignment,
                                                   "grade": form.get("submission[posted_grade]")})
                    return self._send(200, {"id": 1, "grade": form.get("submission[posted_grade]")},
                                      {"X-Rate-Limit-Remaining": "650"})
                return self._send(404, {"error": "not found"})

        return Handler

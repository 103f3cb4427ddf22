"""Canvas's REST API with a staff token, where LTI is not set up: the roster (the course's students)
and grades (each student's submission of the Canvas assignment). Canvas limits each token with a
leaky bucket: it reports what is left in X-Rate-Limit-Remaining and answers 403 "Rate Limit Exceeded"
when it is empty; the client slows down as the bucket empties and waits, then retries, when refused."""

from __future__ import annotations

import time
from collections.abc import Callable

from grader.core.errors import LmsError
from grader.lms import http
from grader.lms.config import CanvasConfig
from grader.lms.services import Member

LOW_BUCKET = 100.0  # below this much left, pause between calls
MAX_TRIES = 5
MAX_PAGES = 1000


class CanvasApi:
    def __init__(self, config: CanvasConfig, sleep: Callable[[float], None] = time.sleep):
        self.config = config
        self._token = config.token()
        self._sleep = sleep
        self.waited_s = 0.0  # how long the rate limit made us wait (reported by commands)

    def _wait(self, seconds: float) -> None:
        self.waited_s += seconds
        self._sleep(seconds)

    def _call(self, method: str, url: str, form: dict[str, str] | None = None) -> http.Answer:
        if not url.startswith("http"):
            url = f"{self.config.base_url}{url}"
        for attempt in range(MAX_TRIES):
            answer = http.request(method, url, headers={"Authorization": f"Bearer {self._token}",
                                                       "Accept": "application/json"}, form=form)
            remaining = answer.header("x-rate-limit-remaining")
            if answer.status == 403 and b"Rate Limit Exceeded" in answer.body:
                self._wait(min(2.0 ** attempt, 30.0))
                continue
            if answer.status == 401:
                raise LmsError("Canvas refused the staff token (HTTP 401): is it valid and not expired?")
            try:
                if remaining and float(remaining) < LOW_BUCKET:
                    self._wait(0.5)
            except ValueError:
                pass
            return answer
        raise LmsError(f"Canvas kept refusing {method} {url} for its rate limit ({MAX_TRIES} tries)")

    def members(self) -> list[Member]:
        url = (f"/api/v1/courses/{self.config.course_id}/users?enrollment_type[]=student&include[]=email"
               "&per_page=100")
        found: list[Member] = []
        for _ in range(MAX_PAGES):
            answer = self._call("GET", url)
            if not answer.ok:
                raise LmsError(f"Canvas's user list answered HTTP {answer.status}")
            users = answer.json()
            for user in users if isinstance(users, list) else []:
                found.append(Member(lms_user_id=str(user.get("id") or ""), name=str(user.get("name") or ""),
                                    email=str(user.get("email") or ""), sis_id=str(user.get("sis_user_id") or ""),
                                    login=str(user.get("login_id") or ""), learner=True))
            url = answer.next_link()
            if not url:
                break
        return found

    def send_score(self, assignment_id: str, lms_user_id: str, score: float) -> None:
        canvas_assignment = self.config.assignment(assignment_id)
        answer = self._call("PUT", f"/api/v1/courses/{self.config.course_id}/assignments/{canvas_assignment}/"
                                   f"submissions/{lms_user_id}", form={"submission[posted_grade]": f"{score:g}"})
        if not answer.ok:
            raise LmsError(f"Canvas refused the grade (HTTP {answer.status})")

"""The quiz: questions in assignments/<id>/quiz.toml, the key in
reference/<id>/quiz_key.toml, the student's answers in answers.toml.

Answers are parsed as TOML data in the trusted process; nothing is executed.
A wrong answer's feedback names the section to reread, never the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from grader.core.compat import tomllib
from grader.core.errors import ManifestError
from grader.core.records import FAILED, PASSED, PENDING, TestOutcome

ANSWERS_FILE = "answers.toml"
# What a student gave for one question (a quiz outcome's detail["answer"]): a fact for the reports,
# so a blank answer is never counted as a wrong one.
RIGHT, WRONG, BLANK, UNREADABLE = "right", "wrong", "blank", "unreadable"  # unreadable: no answers, or not TOML


@dataclass(frozen=True)
class Question:
    id: str
    kind: str  # choice | numeric
    prompt: str
    choices: tuple[str, ...] = ()
    weight: float = 1.0
    section: str = ""


def load_questions(path: Path) -> list[Question]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{path}: {exc}") from exc
    questions = []
    for raw in data.get("questions", []):
        if raw.get("kind") not in ("choice", "numeric") or "id" not in raw:
            raise ManifestError(f"{path}: each question needs an id and kind choice|numeric")
        questions.append(Question(raw["id"], raw["kind"], raw.get("prompt", ""),
                                  tuple(raw.get("choices", ())), float(raw.get("weight", 1.0)),
                                  raw.get("section", "")))
    return questions


def load_key(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")).get("answers", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ManifestError(f"{path}: {exc}") from exc


def _parse_answers(text: str | None) -> tuple[dict, str]:
    if text is None:
        return {}, f"no {ANSWERS_FILE} was submitted"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return {}, f"{ANSWERS_FILE} is not valid TOML ({exc})"
    except (RecursionError, ValueError):  # nested too deeply, or a number too long to convert
        return {}, f"{ANSWERS_FILE} is not valid TOML (too deeply nested or too long to read)"
    answers = data.get("answers", data)
    return (answers, "") if isinstance(answers, dict) else ({}, f"{ANSWERS_FILE} has no table of answers")


def is_right(question: Question, expected, given) -> bool:
    """Whether `given` earns the question's points when the key says `expected`."""
    if given is None or given == "":
        return False
    if question.kind == "choice":
        if isinstance(given, str) and not given.strip().lstrip("-").isdigit():
            text = given.strip().lower()
            return any(text == c.strip().lower() for i, c in enumerate(question.choices) if i == expected)
        try:
            return int(given) == int(expected)
        except (TypeError, ValueError):
            return False
    value = expected["value"] if isinstance(expected, dict) else expected
    tolerance = expected.get("tolerance", 1e-6) if isinstance(expected, dict) else 1e-6
    try:
        number = float(given)
    except (TypeError, ValueError):
        return False
    return math.isfinite(number) and abs(number - float(value)) <= tolerance


def key_problems(questions: list[Question], key: dict) -> list[str]:
    """What in `key` would mark an answer wrongly: a question it does not answer, a choice answer that is
    not the index of a choice, a numeric answer without a value or with a negative tolerance."""
    problems = []
    for question in questions:
        expected = key.get(question.id)
        if expected is None:
            problems.append(f"it has no answer for question {question.id}")
        elif question.kind == "choice" and not (isinstance(expected, int) and not isinstance(expected, bool)
                                                and 0 <= expected < len(question.choices)):
            problems.append(f"{question.id} is a choice question; its answer must be the index of a choice "
                            f"(0 to {len(question.choices) - 1}), not {expected!r}")
        elif question.kind == "numeric" and not _numeric_key(expected):
            problems.append(f"{question.id} is numeric; its answer must be a number or {{ value = ..., "
                            f"tolerance = ... }} (tolerance >= 0), not {expected!r}")
    return problems


def _numeric_key(expected) -> bool:
    if isinstance(expected, dict):
        expected, tolerance = expected.get("value"), expected.get("tolerance", 1e-6)
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not tolerance >= 0:
            return False
    return isinstance(expected, int | float) and not isinstance(expected, bool) and math.isfinite(expected)


def check_key(questions: list[Question], key: dict, where: Path | str) -> None:
    """Refuse a key that cannot mark every question (key_problems): ManifestError, one line, before any
    answer is marked, so that a correct answer is never marked wrong by the key's mistake."""
    problems = key_problems(questions, key)
    if problems:
        raise ManifestError(f"the quiz key {where} cannot mark this quiz: {'; '.join(problems)}. Fix the key "
                            f"(grade validate checks it); no answer was marked")


def grade_quiz(questions: list[Question], key: dict, answers_text: str | None,
               task_id: str = "quiz") -> list[TestOutcome]:
    """One outcome per question; `fraction` carries the question's weight share. ManifestError for a key
    that cannot mark every question (check_key)."""
    check_key(questions, key, "given")
    answers, problem = _parse_answers(answers_text)
    total = sum(q.weight for q in questions) or 1.0
    outcomes = []
    for question in questions:
        given = answers.get(question.id)
        right = question.id in key and is_right(question, key[question.id], given)
        if right:
            message, answer, cause = "", RIGHT, None
        elif problem:
            message, answer = problem, UNREADABLE
            cause = {"key": "quiz:unreadable", "summary": "answers could not be read", "text": problem}
        elif given is None or given == "":
            message, answer = f"no answer given: write one in {ANSWERS_FILE}", BLANK
            cause = {"key": "quiz:blank", "summary": "no answer given", "text": message}
        else:
            message, answer = f"not the expected answer; reread lecture {question.section}".strip(), WRONG
            cause = None
        outcomes.append(TestOutcome(
            name=f"quiz::{question.id}", task=task_id, status=PASSED if right else FAILED,
            kind="" if right else "wrong", message=message, fraction=1.0 if right else 0.0,
            visibility="visible", detail={"weight": question.weight / total * len(questions), "answer": answer},
            problem=cause,
        ))
    return outcomes


def unanswered(questions: list[Question], answers_text: str | None) -> list[str]:
    """The ids of the questions `answers_text` leaves blank (all of them when it is missing or
    not valid TOML). Needs no key: `grade check` uses it to say whether the quiz is complete."""
    answers, _ = _parse_answers(answers_text)
    return [q.id for q in questions if answers.get(q.id) in (None, "")]


def answered_outcome(questions: list[Question], answers_text: str | None, task_id: str = "quiz") -> TestOutcome:
    """`grade check`'s word on the quiz: pending (check has no key, so it marks nothing), and how many
    questions answers.toml answers."""
    blank = unanswered(questions, answers_text)
    _, problem = _parse_answers(answers_text)
    count = f"{len(questions) - len(blank)} of {len(questions)} questions answered"
    if problem:
        count += f" ({problem})"
    elif blank:
        count += f"; blank: {', '.join(blank)}"
    else:
        count += "; every question has an answer"
    return TestOutcome(name="quiz::answered", task=task_id, status=PENDING, kind="not_run",
                       message=f"grade check does not mark the quiz (grade submit does): {count}",
                       visibility="visible", detail={"unanswered": blank, "questions": len(questions)})

"""The lecture's sections, as the course declares them, and the "§N" citations in its files.

Feedback, handouts, stubs, mutants and quizzes send students to a section of the lecture
("reread §13"). A citation of a section the lecture does not have sends them nowhere, so the
course keeps the lecture's section list in a file of its own (`course.toml`: `[lecture]
sections = "lecture/sections.toml"`, a table `[sections]` of `number = "title"`), and
`grade validate` checks every citation against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grader.core.compat import tomllib
from grader.core.errors import SettingsError

CITATION = re.compile(r"§\s?(\d+)")  # "§13", "§ 13"; a range "§4–§14" is two citations


@dataclass(frozen=True)
class Citation:
    """One "§N" in a file: where (path relative to the course, 1-based line) and which section."""

    path: str
    line: int
    section: int

    def describe(self) -> str:
        return f"{self.path}:{self.line} cites §{self.section}"


def load_sections(path: Path) -> dict[int, str]:
    """§ number → title, from the course's section list; SettingsError naming what is wrong."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"{path}: the lecture's section list cannot be read ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from exc
    table = data.get("sections")
    if not isinstance(table, dict) or not table:
        raise SettingsError(f'{path}: needs a [sections] table of number = "title", e.g. 13 = "Causal masking"')
    sections = {}
    for key, title in table.items():
        if not str(key).isdigit() or not isinstance(title, str):
            raise SettingsError(f'{path}: [sections] entries are number = "title"; got {key} = {title!r}')
        sections[int(key)] = title
    return sections


def citations(text: str, path: str) -> list[Citation]:
    """Every "§N" in `text`, with its line."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        found += [Citation(path, number, int(match.group(1))) for match in CITATION.finditer(line)]
    return found


def describe_range(sections: dict[int, str]) -> str:
    """'§1–§32' for a list without gaps, else every number."""
    numbers = sorted(sections)
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"§{numbers[0]}–§{numbers[-1]}"
    return ", ".join(f"§{n}" for n in numbers)

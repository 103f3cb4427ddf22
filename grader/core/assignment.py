"""One assignment of a course, built once where a command starts, and passed down.

An `Assignment` holds everything below the command line needs to know about the
assignment it grades: the course (and so the layout: a course's folders, or an
unzipped student bundle), the validated manifest, the course's settings, where
each file lives (the handout's folder, the hidden tests, the quiz and its key,
the kernel contract's launchers, the reference), the fingerprint of what grades
it, and the sandbox switches of the command that asked. Nothing below the CLI
loads a manifest or the settings by path: a worker process that grades for a
command (a pool worker, a Ray actor) is handed this value, or builds it once at
its own start.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.course import MANIFEST_FILE, Course
from grader.core.due import DueDate
from grader.core.fingerprint import grading_fingerprint
from grader.core.manifest import Manifest, load_manifest
from grader.core.settings import CourseSettings, load_settings
from grader.sandbox.isolation import SandboxSwitches

QUIZ_FILE, QUIZ_KEY_FILE = "quiz.toml", "quiz_key.toml"


@dataclass(frozen=True)
class Assignment:
    """An assignment as grading sees it (see the module docstring)."""

    course: Course
    manifest: Manifest
    settings: CourseSettings = field(default_factory=CourseSettings)
    switches: SandboxSwitches = field(default_factory=SandboxSwitches)

    @classmethod
    def load(cls, course: Course, assignment_id: str, switches: SandboxSwitches | None = None) -> Assignment:
        """Read the manifest and the course's settings once; `switches` default to this process's."""
        manifest = load_manifest(course.assignment_dir(assignment_id) / MANIFEST_FILE)
        return cls(course=course, manifest=manifest, settings=load_settings(course.root),
                   switches=SandboxSwitches.from_environment() if switches is None else switches)

    @functools.cached_property
    def fingerprint(self) -> str:
        """What grades it (grader.core.fingerprint), computed once when first asked; "" without a reference
        (a student bundle)."""
        return grading_fingerprint(self.course, self.manifest) if self.has_reference else ""

    @property
    def id(self) -> str:
        return self.manifest.id

    @property
    def folder(self) -> Path:
        """What students get: the manifest, stubs, public tests, handout, quiz, answers template."""
        return self.course.assignment_dir(self.id)

    @property
    def reference(self) -> Path:
        """reference/<id>/: solutions, hidden tests, the catalogue, the quiz key (never in a bundle)."""
        return self.course.reference_for(self.id)

    @property
    def has_reference(self) -> bool:
        return self.reference.is_dir()

    @property
    def hidden_tests(self) -> Path:
        return self.reference / "tests"

    @property
    def public_tests(self) -> Path:
        return self.folder / "tests"

    @property
    def quiz_questions(self) -> Path:
        return self.folder / QUIZ_FILE

    @property
    def quiz_key(self) -> Path:
        return self.reference / QUIZ_KEY_FILE

    @property
    def contract_module(self) -> Path | None:
        """The kernel contract's launcher module, when the assignment has one."""
        contract = self.manifest.contract
        return self.folder / contract.module if contract else None

    @property
    def due_date(self) -> DueDate:
        """The manifest's due date, before any student's extension."""
        return self.manifest.due_date

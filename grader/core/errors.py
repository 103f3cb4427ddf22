"""One small hierarchy of errors the grader raises on purpose.

The CLI maps each to a one-line message and an exit code; anything else that
escapes is a bug in the grader, never the student's fault.
"""


class GraderError(Exception):
    """Base class: the grader could not do what was asked."""

    exit_code = 2


class CourseNotFound(GraderError):
    """No course root (a folder holding assignments/) could be located."""


class UnknownAssignment(GraderError):
    """The assignment id is not under assignments/."""


class UnknownTask(GraderError):
    """The task id is not in the assignment's manifest."""


class ManifestError(GraderError):
    """assignment.toml is missing, malformed or inconsistent (`problems`: each one, in words)."""

    def __init__(self, message: str, problems: list[str] | tuple[str, ...] | None = None):
        super().__init__(message)
        self.problems = tuple(problems) if problems else (message,)


class SubmissionError(GraderError):
    """The workspace, zip or notebook could not be read as a submission."""


class GradebookError(GraderError):
    """The gradebook could not be read or written."""


class ClassDataError(GraderError):
    """A roster or timestamps CSV (class-level input) could not be read."""


class InvalidStudentId(ClassDataError):
    """A student id that cannot serve as one folder name and one gradebook key."""


class StaffActionRefused(GraderError):
    """An override or extension that cannot be recorded (unknown task, points out of range...)."""


class OptionsConflict(GraderError):
    """A command's options that do not go together, or one that needs another (the CLI shows the usage)."""


class ReleaseLeak(GraderError):
    """A student bundle would contain instructor-only material."""

    exit_code = 3


class ValidateRequired(GraderError):
    """An assignment whose last complete `grade validate` failed, or whose files changed since it passed,
    asked to ship (release, autograder) without --force."""

    exit_code = 5


class StarterNotPristine(ReleaseLeak):
    """A student bundle's starter files are not the blank starter: a stub with a body, an answer."""


class SettingsError(GraderError):
    """course.toml (course-wide settings) is malformed."""


class SandboxRefused(GraderError):
    """No sandbox level the course requires for an official grade is available here."""

    exit_code = 4


class SandboxFailed(GraderError):
    """The sandbox worker could not be started (a host problem, never the student's)."""


class LmsError(GraderError):
    """The LMS link is misconfigured, refused a request, or could not be reached."""


class LaunchRefused(LmsError):
    """An LTI launch that fails a check (signature, issuer, audience, nonce, state, expiry, role...)."""

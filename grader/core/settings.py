"""Course-wide settings: `course.toml` at the course root (optional).

    [sandbox]
    # An official grade (grade submit, grade batch, the Gradescope autograder) needs
    # one of these levels; each is a '+'-joined set of layers that must all be present.
    require = ["bubblewrap", "process+uid+landlock+seccomp+reaper"]
    # The uids workers run as when the grader is root: one per running worker.
    uid_range = [60000, 60999]

    [release]
    # The command a student working alone installs the grader with, written into the
    # README of every bundle `grade release` makes (default: DEFAULT_INSTALL).
    install = "python -m pip install git+https://git.example.edu/attention-course.git"

    [serve]
    # grade serve: uploads a student may make per assignment within the window (shown to them before
    # they reach it), how long a sign-in link and a session last, and the GPU tier's quota of timings
    # per student and assignment within a day.
    uploads_per_window = 10
    window_minutes = 60
    link_hours = 72
    session_hours = 12
    gpu_timings_per_day = 5

    [lecture]
    # The lecture's sections (§ number = title), a TOML file of the course: grade validate
    # checks that every § the course cites is one of them (grader.core.lecture).
    sections = "lecture/sections.toml"

Every key is optional; a missing file means the defaults below. Values are
checked by type and range, one clear error per problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from grader.core.compat import tomllib
from grader.core.errors import SettingsError
from grader.sandbox.isolation import LAYER_ORDER
from grader.sandbox.uids import DEFAULT_UID_RANGE

SETTINGS_FILE = "course.toml"
DEFAULT_REQUIRED_LEVELS = ("bubblewrap", "process+uid+landlock+seccomp+reaper")


def parse_level(text: str, where: str) -> frozenset[str]:
    """'process+uid+landlock' → the set of its layers (each must be a known layer)."""
    layers = frozenset(part.strip() for part in text.split("+") if part.strip())
    unknown = sorted(layers - set(LAYER_ORDER))
    if not layers or unknown:
        raise SettingsError(f"{where}: {text!r} is not a level: layers are {', '.join(LAYER_ORDER)} "
                            f"joined by '+'" + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    return layers


@dataclass(frozen=True)
class SandboxSettings:
    require: tuple[frozenset[str], ...] = field(
        default_factory=lambda: tuple(parse_level(level, "default") for level in DEFAULT_REQUIRED_LEVELS))
    uid_range: tuple[int, int] = DEFAULT_UID_RANGE

    def required_text(self) -> str:
        return " or ".join("+".join(n for n in LAYER_ORDER if n in level) for level in self.require)


def default_install() -> str:
    """The grader as published under its package name, at this version."""
    from grader import __version__

    return f'python -m pip install "attention-course-grader=={__version__}"'


@dataclass(frozen=True)
class ReleaseSettings:
    install: str = field(default_factory=default_install)  # how a student installs the grader (one command)
    install_configured: bool = False  # whether course.toml said so, or it is the default


@dataclass(frozen=True)
class LectureSettings:
    """Where the course keeps its lecture's section list: a path relative to the course root, or ""
    (none declared: the § numbers the course cites go unchecked). Read when checked, not here, so
    that settings load where the file is not shipped (a Gradescope bundle)."""

    sections: str = ""


@dataclass(frozen=True)
class ServeSettings:
    """The course server's limits (grade serve): every value a positive whole number."""

    uploads_per_window: int = 10  # uploads per student and assignment within window_minutes
    window_minutes: int = 60
    link_hours: int = 72  # a sign-in link's life
    session_hours: int = 12  # a signed-in session's life
    gpu_timings_per_day: int = 5  # GPU timings per student and assignment within 24 hours


SERVE_KEYS = tuple(ServeSettings.__dataclass_fields__)


@dataclass(frozen=True)
class CourseSettings:
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    release: ReleaseSettings = field(default_factory=ReleaseSettings)
    lecture: LectureSettings = field(default_factory=LectureSettings)
    serve: ServeSettings = field(default_factory=ServeSettings)


def _serve(table: object, where: str) -> ServeSettings:
    if not isinstance(table, dict):
        raise SettingsError(f"{where}: [serve] must be a table")
    unknown = sorted(set(table) - set(SERVE_KEYS))
    if unknown:
        raise SettingsError(f"{where}: unknown [serve] key(s) {', '.join(unknown)} (known: {', '.join(SERVE_KEYS)})")
    for key, value in table.items():
        if type(value) is not int or not 1 <= value <= 1_000_000:
            raise SettingsError(f"{where}: serve.{key} must be a whole number from 1 to 1000000, got {value!r}")
    return ServeSettings(**table)


def _release(table: object, where: str) -> ReleaseSettings:
    if not isinstance(table, dict):
        raise SettingsError(f"{where}: [release] must be a table")
    unknown = sorted(set(table) - {"install"})
    if unknown:
        raise SettingsError(f"{where}: unknown [release] key(s) {', '.join(unknown)} (known: install)")
    if "install" not in table:
        return ReleaseSettings()
    value = table["install"]
    if not isinstance(value, str) or not value.strip() or "\n" in value.strip():
        raise SettingsError(f"{where}: release.install must be one command line (a string), e.g. "
                            f"\"python -m pip install git+https://...\"")
    return ReleaseSettings(install=value.strip(), install_configured=True)


def _sandbox(table: object, where: str) -> SandboxSettings:
    if not isinstance(table, dict):
        raise SettingsError(f"{where}: [sandbox] must be a table")
    unknown = sorted(set(table) - {"require", "uid_range"})
    if unknown:
        raise SettingsError(f"{where}: unknown [sandbox] key(s) {', '.join(unknown)} (known: require, uid_range)")
    defaults = SandboxSettings()
    require = defaults.require
    if "require" in table:
        value = table["require"]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise SettingsError(f"{where}: sandbox.require must be a non-empty list of levels (strings)")
        require = tuple(parse_level(v, f"{where}: sandbox.require") for v in value)
    uid_range = defaults.uid_range
    if "uid_range" in table:
        value = table["uid_range"]
        if not (isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value)
                and 1000 <= value[0] <= value[1] < 2**31):
            raise SettingsError(f"{where}: sandbox.uid_range must be [first, last] with 1000 <= first <= last "
                                f"(unprivileged uids), got {value!r}")
        uid_range = (value[0], value[1])
    return SandboxSettings(require=require, uid_range=uid_range)


def _lecture(table: object, where: str) -> LectureSettings:
    if not isinstance(table, dict):
        raise SettingsError(f"{where}: [lecture] must be a table")
    unknown = sorted(set(table) - {"sections"})
    if unknown:
        raise SettingsError(f"{where}: unknown [lecture] key(s) {', '.join(unknown)} (known: sections)")
    sections = table.get("sections", "")
    relative = PurePosixPath(sections) if isinstance(sections, str) else None
    if relative is None or (sections and (relative.is_absolute() or ".." in relative.parts)):
        raise SettingsError(f"{where}: lecture.sections must be a path inside the course, relative to its root "
                            f"(e.g. \"lecture/sections.toml\"), got {sections!r}")
    return LectureSettings(sections=sections)


def load_settings(course_root: Path) -> CourseSettings:
    """The course's settings (defaults when it has no course.toml)."""
    path = Path(course_root) / SETTINGS_FILE
    if not path.is_file():
        return CourseSettings()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"{path}: not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - {"sandbox", "release", "lecture", "serve", "lms"})  # [lms]: grader.lms.config reads it
    if unknown:
        raise SettingsError(f"{path}: unknown table(s) {', '.join(unknown)} "
                            "(known: sandbox, release, lecture, serve, lms)")
    return CourseSettings(sandbox=_sandbox(data.get("sandbox", {}), str(path)),
                          release=_release(data.get("release", {}), str(path)),
                          lecture=_lecture(data.get("lecture", {}), str(path)),
                          serve=_serve(data.get("serve", {}), str(path)))

"""assignment.toml → frozen dataclasses. No other I/O happens here.

A manifest is the single place where points live. Tests name their task with
`@pytest.mark.task("id")`; the manifest says what that task is worth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from grader.core.compat import parse_iso, tomllib
from grader.core.errors import ManifestError
from grader.sandbox.forbidden import API_GROUPS, REQUIREMENTS
from grader.sandbox.limits import SandboxLimits

TASK_KINDS = ("code", "quiz", "timing")


@dataclass(frozen=True)
class LatePolicy:
    """Late work: a grace period, then a fraction off per started day, then nothing."""

    grace_minutes: int = 0
    penalty_per_day: float = 0.0  # fraction of the total, per started day late
    max_days_late: int | None = None  # later than this earns 0


# An assignment's [limits] table: the sandbox's own limits, defaults and names included.
Limits = SandboxLimits


@dataclass(frozen=True)
class SpeedThreshold:
    """Student time / reference time at most `ratio` earns `fraction` of the task."""

    ratio: float
    fraction: float


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    points: float
    kind: str = "code"
    functions: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    bonus: bool = False
    speed: tuple[SpeedThreshold, ...] = ()
    description: str = ""
    requires: tuple[str, ...] = ()  # what the static check must find, e.g. "triton_launch"
    uses: tuple[str, ...] = ()  # functions of other tasks that this task's tests call

    @property
    def section_text(self) -> str:
        return ", ".join(self.sections)


@dataclass(frozen=True)
class Manifest:
    id: str
    title: str
    files: tuple[str, ...]
    tasks: tuple[Task, ...]
    deadline: datetime | None = None
    sections: str = ""
    late_policy: LatePolicy = field(default_factory=LatePolicy)
    limits: Limits = field(default_factory=Limits)
    path: Path | None = None

    def task(self, task_id: str) -> Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(task_id)

    def has_task(self, task_id: str) -> bool:
        return any(t.id == task_id for t in self.tasks)

    def task_for_function(self, function: str) -> Task | None:
        for task in self.tasks:
            if function in task.functions:
                return task
        return None

    @property
    def functions(self) -> tuple[str, ...]:
        return tuple(f for t in self.tasks for f in t.functions)

    @property
    def max_points(self) -> float:
        return sum(t.points for t in self.tasks if not t.bonus)

    @property
    def bonus_points(self) -> float:
        return sum(t.points for t in self.tasks if t.bonus)


def _require(table: dict, key: str, kind: type, where: str):
    if key not in table:
        raise ManifestError(f"{where}: missing required key {key!r}")
    value = table[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind):
        raise ManifestError(f"{where}: {key!r} must be {kind.__name__}, got {value!r}")
    return value


def _strings(table: dict, key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ManifestError(f"{where}: {key!r} must be a list of strings")
    return tuple(value)


def _parse_task(raw: dict, index: int) -> Task:
    where = f"tasks[{index}]"
    if not isinstance(raw, dict):
        raise ManifestError(f"{where} must be a table")
    task_id = _require(raw, "id", str, where)
    where = f"task {task_id!r}"
    points = _require(raw, "points", float, where)
    if points < 0:
        raise ManifestError(f"{where}: points must be >= 0")
    kind = raw.get("kind", "code")
    if kind not in TASK_KINDS:
        raise ManifestError(f"{where}: kind must be one of {', '.join(TASK_KINDS)}")
    speed = []
    for pair in raw.get("speed", []):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ManifestError(f"{where}: speed entries are [ratio, fraction] pairs")
        speed.append(SpeedThreshold(float(pair[0]), float(pair[1])))
    if kind == "timing" and not speed:
        raise ManifestError(f"{where}: a timing task needs speed thresholds")
    forbidden = _strings(raw, "forbidden", where)
    unknown = [g for g in forbidden if g not in API_GROUPS]
    if unknown:
        raise ManifestError(f"{where}: unknown forbidden group(s) {unknown} "
                            f"(known: {', '.join(API_GROUPS)})")
    requires = _strings(raw, "requires", where)
    unknown = [r for r in requires if r not in REQUIREMENTS]
    if unknown:
        raise ManifestError(f"{where}: unknown requirement(s) {unknown} (known: {', '.join(REQUIREMENTS)})")
    functions, uses = _strings(raw, "functions", where), _strings(raw, "uses", where)
    if requires and not (functions or uses):
        raise ManifestError(f"{where}: 'requires' needs the task's functions or 'uses' to check")
    return Task(
        id=task_id,
        title=raw.get("title", task_id),
        points=points,
        kind=kind,
        functions=functions,
        sections=_strings(raw, "sections", where),
        forbidden=forbidden,
        bonus=bool(raw.get("bonus", False)),
        speed=tuple(sorted(speed, key=lambda s: s.ratio)),
        description=raw.get("description", ""),
        requires=requires,
        uses=uses,
    )


def _parse_datetime(value, where: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = parse_iso(value)
        except ValueError as exc:
            raise ManifestError(f"{where}: not an ISO 8601 date-time: {value!r}") from exc
    else:
        raise ManifestError(f"{where}: not a date-time: {value!r}")
    if parsed.tzinfo is None:
        raise ManifestError(f"{where}: give a time zone (for example +00:00)")
    return parsed


def parse_manifest(data: dict, path: Path | None = None) -> Manifest:
    """Validate a decoded assignment.toml."""
    where = str(path) if path else "assignment.toml"
    assignment_id = _require(data, "id", str, where)
    raw_tasks = data.get("tasks")
    if not isinstance(raw_tasks, list) or not raw_tasks:
        raise ManifestError(f"{where}: needs at least one [[tasks]] table")
    tasks = tuple(_parse_task(raw, i) for i, raw in enumerate(raw_tasks))
    ids = [t.id for t in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ManifestError(f"{where}: duplicate task ids {duplicates}")
    functions = [f for t in tasks for f in t.functions]
    shared = sorted({f for f in functions if functions.count(f) > 1})
    if shared:
        raise ManifestError(f"{where}: functions claimed by two tasks: {shared}")
    for task in tasks:
        strays = [f for f in task.uses if f not in functions or f in task.functions]
        if strays:
            raise ManifestError(f"task {task.id!r}: 'uses' must name functions of other tasks, "
                                f"not {strays}")
    late = data.get("late_policy", {})
    limits = data.get("limits", {})
    try:
        late_policy = LatePolicy(**late)
        limit_values = Limits(**limits)
    except TypeError as exc:
        raise ManifestError(f"{where}: {exc}") from exc
    return Manifest(
        id=assignment_id,
        title=data.get("title", assignment_id),
        files=_strings(data, "files", where),
        tasks=tasks,
        deadline=_parse_datetime(data.get("deadline"), f"{where}: deadline"),
        sections=data.get("sections", ""),
        late_policy=late_policy,
        limits=limit_values,
        path=path,
    )


def load_manifest(path: Path) -> Manifest:
    """Read and validate `assignments/<id>/assignment.toml`."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ManifestError(f"no manifest at {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from exc
    return parse_manifest(data, Path(path))

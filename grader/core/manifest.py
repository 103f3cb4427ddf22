"""assignment.toml → frozen dataclasses. No other I/O happens here.

A manifest is the single place where points live. Tests name their task with
`@pytest.mark.task("id")`; the manifest says what that task is worth.

Every value is checked by type and range before anything is graded, because a
slip here grades a whole class wrongly without a sound (`call_timeout_s = "30"`
would time every call out; a negative penalty would add points): timeouts and
limits > 0, points >= 0, penalties within [0, 1], deadlines with a time zone,
speed thresholds sorted with fractions within (0, 1], unknown keys refused.
All problems are collected and raised together, one clear message each, in
one ManifestError.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path, PurePosixPath

from grader.core.compat import parse_iso, tomllib
from grader.core.due import DueDate
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
class KernelContract:
    """How the grader launches the student's kernels itself (kernel tasks graded by construction).

    `module` is the course's launcher module in the assignment's folder (shipped to students:
    it is exactly how their kernels are launched); it imports the student's `file` by its module
    name. Each launcher is a function of `module` that allocates its outputs and launches the
    kernels named for it. A task lists launchers among its `functions` (or `uses`), and its
    tests call them like student functions: they run in a worker holding only the student's
    vetted kernels (grader.intake.kernels)."""

    module: str
    file: str
    launchers: tuple[tuple[str, tuple[str, ...]], ...]  # launcher → the kernels it launches

    @property
    def launcher_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.launchers)

    def kernels_of(self, launcher: str) -> tuple[str, ...]:
        return next((kernels for name, kernels in self.launchers if name == launcher), ())

    @property
    def kernels(self) -> tuple[str, ...]:
        """Every kernel any launcher launches, in order, once."""
        return tuple(dict.fromkeys(k for _, kernels in self.launchers for k in kernels))


GRADESCOPE_VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")  # Gradescope's words


@dataclass(frozen=True)
class GradescopeSettings:
    """How results.json shows each test on Gradescope: `hidden_tests` for the hidden suite's
    (and the quiz's) results, `public_tests` for the public tests'. One of
    GRADESCOPE_VISIBILITIES (Gradescope: `after_published` shows a test only once the
    grades are published)."""

    hidden_tests: str = "visible"
    public_tests: str = "visible"


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
    gradescope: GradescopeSettings = field(default_factory=GradescopeSettings)
    contract: KernelContract | None = None

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
    def due_date(self) -> DueDate:
        """The manifest's due date, before any student's extension (grader.storage.gradebook.due_with applies one)."""
        return DueDate(deadline=self.deadline)

    @property
    def has_timing_task(self) -> bool:
        """Whether a task is timed (against the course's reference kernels, on a GPU)."""
        return any(task.kind == "timing" for task in self.tasks)

    def is_launcher(self, function: str) -> bool:
        """Whether `function` is a launcher of the kernel contract (run by the grader, not the student)."""
        return self.contract is not None and function in self.contract.launcher_names

    def kernels_for(self, task: Task) -> tuple[str, ...]:
        """The student kernels a task's tests launch through the contract (its functions and uses)."""
        if self.contract is None:
            return ()
        return tuple(dict.fromkeys(k for f in (*task.functions, *task.uses) for k in self.contract.kernels_of(f)))

    @property
    def max_points(self) -> float:
        return sum(t.points for t in self.tasks if not t.bonus)

    @property
    def bonus_points(self) -> float:
        return sum(t.points for t in self.tasks if t.bonus)


TOP_KEYS = ("id", "title", "sections", "files", "deadline", "late_policy", "limits", "tasks", "gradescope",
            "contract")
CONTRACT_KEYS = ("module", "file", "launchers")
TASK_KEYS = ("id", "title", "points", "kind", "functions", "sections", "forbidden", "bonus", "speed",
             "description", "requires", "uses")
LATE_POLICY_KEYS = ("grace_minutes", "penalty_per_day", "max_days_late")
GRADESCOPE_KEYS = tuple(f.name for f in fields(GradescopeSettings))
LIMIT_KEYS = tuple(f.name for f in fields(SandboxLimits))


class _Problems:
    """Every problem of one manifest, so an author sees them all at once (one line each)."""

    def __init__(self, where: str):
        self.where = where
        self.found: list[str] = []

    def add(self, message: str) -> None:
        self.found.append(message)

    def raise_if_any(self) -> None:
        if not self.found:
            return
        if len(self.found) == 1:
            raise ManifestError(f"{self.where}: {self.found[0]}", problems=self.found)
        listed = "; ".join(f"({n}) {p}" for n, p in enumerate(self.found, start=1))
        raise ManifestError(f"{self.where}: {len(self.found)} problems: {listed}", problems=self.found)


def _shown(value: object) -> str:
    """A value as the author wrote it, with its TOML kind (a quoted number is the usual slip)."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the text {value[:60]!r}"
    if isinstance(value, int | float):
        return f"{value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"{type(value).__name__} {value!r}"[:80]


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _unknown_keys(table: dict, known: tuple[str, ...], where: str, problems: _Problems) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(known)})"
            problems.add(f"{where}unknown key {key!r}{hint}")


def _string(table: dict, key: str, where: str, problems: _Problems, default: str = "",
            required: bool = False) -> str:
    if key not in table:
        if required:
            problems.add(f"{where}missing required key {key!r}")
        return default
    value = table[key]
    if not isinstance(value, str) or (required and not value.strip()):
        problems.add(f"{where}{key!r} must be a non-empty text, not {_shown(value)}" if required
                     else f"{where}{key!r} must be a text, not {_shown(value)}")
        return default
    return value


def _strings(table: dict, key: str, where: str, problems: _Problems) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.add(f"{where}{key!r} must be a list of strings, e.g. {key} = [\"a\", \"b\"]")
        return ()
    return tuple(value)


def _number(table: dict, key: str, where: str, problems: _Problems, *, default, kind: str = "float",
            low: float | None = None, low_open: bool = False, high: float | None = None,
            unit: str = "", required: bool = False):
    """table[key] as a number within [low, high] ((low, high] when low_open); the default if absent."""
    if key not in table:
        if required:
            problems.add(f"{where}missing required key {key!r}")
        return default
    value = table[key]
    expected = "a whole number" if kind == "int" else "a number"
    bounds = []
    if low is not None:
        bounds.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        bounds.append(f"<= {high:g}")
    wanted = f"{expected}{' ' + ' and '.join(bounds) if bounds else ''}{', ' + unit if unit else ''}"
    if not _is_number(value) or (kind == "int" and not isinstance(value, int)):
        fix = f" (write {key} = {value.strip()}, without quotes)" if isinstance(value, str) and \
            _is_number(_parse_number(value)) else ""
        problems.add(f"{where}{key!r} must be {kind}: {wanted}; got {_shown(value)}{fix}")
        return default
    if (low is not None and (value <= low if low_open else value < low)) or (high is not None and value > high):
        problems.add(f"{where}{key!r} must be {wanted}; got {value!r}")
        return default
    return float(value) if kind == "float" else int(value)


def _parse_number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _speed(raw: object, where: str, problems: _Problems) -> tuple[SpeedThreshold, ...]:
    """[[ratio, fraction], ...]: ratios > 0 and increasing, fractions in (0, 1] and not increasing."""
    if not isinstance(raw, list):
        problems.add(f"{where}'speed' must be a list of [ratio, fraction] pairs, e.g. [[1.5, 1.0], [3.0, 0.5]]")
        return ()
    thresholds = []
    for number, pair in enumerate(raw, start=1):
        if not (isinstance(pair, list) and len(pair) == 2 and all(_is_number(v) for v in pair)):
            problems.add(f"{where}speed entry {number} must be a [ratio, fraction] pair of numbers, "
                         f"not {_shown(pair)}")
            return ()
        ratio, fraction = float(pair[0]), float(pair[1])
        if ratio <= 0:
            problems.add(f"{where}speed entry {number}: the time ratio must be > 0, got {ratio:g}")
        if not 0 < fraction <= 1:
            problems.add(f"{where}speed entry {number}: the fraction must be within (0, 1], got {fraction:g}")
        thresholds.append(SpeedThreshold(ratio, fraction))
    ratios = [t.ratio for t in thresholds]
    if any(b <= a for a, b in zip(ratios, ratios[1:], strict=False)):
        problems.add(f"{where}speed thresholds must be sorted by ratio, fastest first, each ratio larger "
                     f"than the one before; got ratios {', '.join(f'{r:g}' for r in ratios)}")
    fractions = [t.fraction for t in thresholds]
    if any(b > a for a, b in zip(fractions, fractions[1:], strict=False)):
        problems.add(f"{where}speed fractions must not grow as the ratio grows (a slower kernel cannot earn "
                     f"more); got fractions {', '.join(f'{f:g}' for f in fractions)}")
    return tuple(thresholds)


def _parse_task(raw: object, index: int, problems: _Problems) -> Task | None:
    if not isinstance(raw, dict):
        problems.add(f"tasks[{index}] must be a table ([[tasks]])")
        return None
    task_id = raw.get("id")
    if not isinstance(task_id, str) or not task_id.strip():
        problems.add(f"tasks[{index}]: missing required key 'id'" if "id" not in raw
                     else f"tasks[{index}]: 'id' must be a non-empty text, not {_shown(task_id)}")
        task_id = f"tasks[{index}]"
        where = f"{task_id}: "
    else:
        where = f"task {task_id!r}: "
    _unknown_keys(raw, TASK_KEYS, where, problems)
    points = _number(raw, "points", where, problems, default=0.0, low=0, required=True)
    kind = raw.get("kind", "code")
    if kind not in TASK_KINDS:
        problems.add(f"{where}kind must be one of {', '.join(TASK_KINDS)}, not {_shown(kind)}")
        kind = "code"
    bonus = raw.get("bonus", False)
    if not isinstance(bonus, bool):
        problems.add(f"{where}'bonus' must be true or false, not {_shown(bonus)}")
        bonus = False
    speed: tuple[SpeedThreshold, ...] = ()
    if "speed" in raw:
        speed = _speed(raw["speed"], where, problems)
        if kind != "timing":
            problems.add(f"{where}'speed' thresholds belong to a task with kind = \"timing\"")
    if kind == "timing" and not speed and "speed" not in raw:
        problems.add(f"{where}a timing task needs speed thresholds, e.g. speed = [[1.5, 1.0], [3.0, 0.5]]")
    forbidden = _strings(raw, "forbidden", where, problems)
    unknown = [g for g in forbidden if g not in API_GROUPS]
    if unknown:
        problems.add(f"{where}unknown forbidden group(s) {unknown} (known: {', '.join(API_GROUPS)})")
    requires = _strings(raw, "requires", where, problems)
    unknown = [r for r in requires if r not in REQUIREMENTS]
    if unknown:
        problems.add(f"{where}unknown requirement(s) {unknown} (known: {', '.join(REQUIREMENTS)})")
    functions, uses = _strings(raw, "functions", where, problems), _strings(raw, "uses", where, problems)
    if requires and not (functions or uses):
        problems.add(f"{where}'requires' needs the task's functions or 'uses' to check")
    return Task(
        id=task_id,
        title=_string(raw, "title", where, problems, default=task_id) or task_id,
        points=points,
        kind=kind,
        functions=functions,
        sections=_strings(raw, "sections", where, problems),
        forbidden=forbidden,
        bonus=bonus,
        speed=speed,
        description=_string(raw, "description", where, problems),
        requires=requires,
        uses=uses,
    )


def _parse_datetime(value, where: str, problems: _Problems) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = parse_iso(value)
        except ValueError:
            problems.add(f"{where}: not an ISO 8601 date-time: {value!r} (write e.g. 2026-12-14T23:59:00+00:00)")
            return None
    else:
        problems.add(f"{where}: not a date-time: {_shown(value)} (write e.g. 2026-12-14T23:59:00+00:00)")
        return None
    if parsed.tzinfo is None:
        problems.add(f"{where}: give a time zone (for example +00:00): {value!s} is ambiguous")
        return None
    return parsed


def _late_policy(raw: object, problems: _Problems) -> LatePolicy:
    if not isinstance(raw, dict):
        problems.add("[late_policy] must be a table")
        return LatePolicy()
    where = "[late_policy] "
    _unknown_keys(raw, LATE_POLICY_KEYS, where, problems)
    return LatePolicy(
        grace_minutes=_number(raw, "grace_minutes", where, problems, default=0, kind="int", low=0,
                              unit="in minutes"),
        penalty_per_day=_number(raw, "penalty_per_day", where, problems, default=0.0, low=0, high=1,
                                unit="the fraction of the score taken off per started day"),
        max_days_late=_number(raw, "max_days_late", where, problems, default=None, kind="int", low=0,
                              unit="in days"),
    )


def _gradescope(raw: object, problems: _Problems) -> GradescopeSettings:
    if not isinstance(raw, dict):
        problems.add("[gradescope] must be a table")
        return GradescopeSettings()
    where = "[gradescope] "
    _unknown_keys(raw, GRADESCOPE_KEYS, where, problems)
    values = {}
    for key in GRADESCOPE_KEYS:
        value = _string(raw, key, where, problems, default=getattr(GradescopeSettings(), key))
        if value not in GRADESCOPE_VISIBILITIES:
            problems.add(f"{where}{key!r} must be one of {', '.join(GRADESCOPE_VISIBILITIES)}, not {_shown(value)}")
            continue
        values[key] = value
    return GradescopeSettings(**values)


def _limits(raw: object, problems: _Problems) -> Limits:
    if not isinstance(raw, dict):
        problems.add("[limits] must be a table")
        return Limits()
    where = "[limits] "
    _unknown_keys(raw, LIMIT_KEYS, where, problems)
    defaults = Limits()
    values = {}
    for name in LIMIT_KEYS:
        default = getattr(defaults, name)
        unit = "in seconds" if name.endswith("_s") else ""
        values[name] = _number(raw, name, where, problems, default=default,
                               kind="int" if isinstance(default, int) else "float", low=0, low_open=True, unit=unit)
    limits = Limits(**values)
    if limits.submission_budget_s < limits.call_timeout_s:
        problems.add(f"{where}submission_budget_s ({limits.submission_budget_s:g}) must be at least "
                     f"call_timeout_s ({limits.call_timeout_s:g}): the budget covers every call of a submission")
    return limits


def _check_files(data: dict, problems: _Problems) -> tuple[str, ...]:
    files = _strings(data, "files", "", problems)
    for name in files:
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or path.suffix != ".py" or "\\" in name:
            problems.add(f"'files' entry {name!r} must be a relative path to a .py module, e.g. \"attention.py\"")
    return files


def _contract(raw: object, files: tuple[str, ...], problems: _Problems) -> KernelContract | None:
    """[contract]: module = "contract.py", file = "flash.py", launchers = {launcher = ["kernel", ...]}."""
    if not isinstance(raw, dict):
        problems.add("[contract] must be a table")
        return None
    where = "[contract] "
    _unknown_keys(raw, CONTRACT_KEYS, where, problems)
    module = _string(raw, "module", where, problems, required=True)
    file = _string(raw, "file", where, problems, required=True)
    if module and (PurePosixPath(module).suffix != ".py" or ".." in PurePosixPath(module).parts
                   or PurePosixPath(module).is_absolute() or module in files):
        problems.add(f"{where}'module' must be the course's launcher module, a relative .py path that is not "
                     f"one of the student's files, not {module!r}")
    if file and file not in files:
        problems.add(f"{where}'file' must be one of the student's files ({', '.join(files)}), not {file!r}")
    launchers = raw.get("launchers")
    if not isinstance(launchers, dict) or not launchers:
        problems.add(f"{where}'launchers' must be a table of launcher = [\"kernel\", ...], e.g. "
                     f"launchers = {{ launch_forward = [\"_flash_fwd_kernel\"] }}")
        return None
    parsed = []
    for name, kernels in launchers.items():
        if not str(name).isidentifier() or not isinstance(kernels, list) or not kernels or \
                not all(isinstance(k, str) and k.isidentifier() for k in kernels):
            problems.add(f"{where}launcher {name!r} must name a non-empty list of kernel names")
            continue
        parsed.append((str(name), tuple(kernels)))
    return KernelContract(module=module, file=file, launchers=tuple(parsed))


def _check_tasks(tasks: list[Task], files: tuple[str, ...], problems: _Problems) -> None:
    ids = [t.id for t in tasks]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        problems.add(f"duplicate task ids {duplicates}")
    functions = [f for t in tasks for f in t.functions]
    shared = sorted({f for f in functions if functions.count(f) > 1})
    if shared:
        problems.add(f"functions claimed by two tasks: {shared}")
    for task in tasks:
        strays = [f for f in task.uses if f not in functions or f in task.functions]
        if strays:
            problems.add(f"task {task.id!r}: 'uses' must name functions of other tasks, not {strays}")
    quizzes = [t.id for t in tasks if t.kind == "quiz"]
    if len(quizzes) > 1:
        problems.add(f"one quiz task per assignment (answers.toml grades one), found {quizzes}")
    if functions and not files:
        problems.add("'files' must list the student's modules (e.g. files = [\"attention.py\"]) "
                     "when tasks name functions")
    points_unreadable = any("'points'" in problem for problem in problems.found)  # already said
    if tasks and not points_unreadable and not any(t.points > 0 for t in tasks if not t.bonus):
        problems.add("the tasks that are not bonus must be worth more than 0 points in all")


def parse_manifest(data: dict, path: Path | None = None) -> Manifest:
    """Validate a decoded assignment.toml: every problem by type and range, all listed at once."""
    where = str(path) if path else "assignment.toml"
    problems = _Problems(where)
    if not isinstance(data, dict):
        problems.add("the manifest must be a TOML table")
        problems.raise_if_any()
    _unknown_keys(data, TOP_KEYS, "", problems)
    assignment_id = _string(data, "id", "", problems, required=True)
    raw_tasks = data.get("tasks")
    tasks: list[Task] = []
    if not isinstance(raw_tasks, list) or not raw_tasks:
        problems.add("needs at least one [[tasks]] table")
    else:
        tasks = [t for i, raw in enumerate(raw_tasks) if (t := _parse_task(raw, i, problems)) is not None]
    files = _check_files(data, problems)
    _check_tasks(tasks, files, problems)
    late_policy = _late_policy(data.get("late_policy", {}), problems)
    limits = _limits(data.get("limits", {}), problems)
    deadline = _parse_datetime(data.get("deadline"), "deadline", problems)
    title = _string(data, "title", "", problems, default=assignment_id) or assignment_id
    sections = _string(data, "sections", "", problems)
    gradescope = _gradescope(data.get("gradescope", {}), problems)
    contract = _contract(data["contract"], files, problems) if "contract" in data else None
    if contract is not None:
        owned = {f for t in tasks for f in t.functions}
        unowned = [name for name in contract.launcher_names if name not in owned]
        if unowned:
            problems.add(f"[contract] launcher(s) {unowned} belong to no task: list each in one task's functions")
    problems.raise_if_any()
    return Manifest(
        id=assignment_id,
        title=title,
        files=files,
        tasks=tuple(tasks),
        deadline=deadline,
        sections=sections,
        late_policy=late_policy,
        limits=limits,
        path=path,
        gradescope=gradescope,
        contract=contract,
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

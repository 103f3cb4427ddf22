"""What `grade validate` already graded, kept by fingerprint, so that a second run grades only what changed.

A grading's fingerprint is a sha256 over everything that can change its result: the workspace's files
(the reference with a mutant swapped in, say), the suite that grades it (the hidden or the public tests),
the seed, the manifest, the quiz, the kernel contract and reference kernels, the reference modules, the
grader's own source and the versions of Python, torch and Triton. A hidden grading of a mutant also
depends on the catalogue, since its failures are diagnosed with it, but only on the mutants that can
name its failures: those of its task's functions (and the functions its task uses), with the part of
`mutants.py` they all share. So editing one mutant regrades that task's mutants, not the assignment.

Entries live under the course's `.grade/validate/<assignment>/`, one JSON file per fingerprint, written
whole (grader.core.files.write_atomic). An entry read back is touched; after a full run, entries no run
has used for KEEP_UNUSED_S are removed (an edit undone an hour later finds its gradings still there).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

from grader import __version__
from grader.core.assignment import Assignment
from grader.core.files import tree_digest, tree_files, write_atomic
from grader.harness.catalogue import Mutant

CACHE_SCHEME = "v1"  # bump when what goes into a fingerprint changes
KEEP_UNUSED_S = 7 * 24 * 3600  # an entry no run used for a week goes at the next full run
CATALOGUE = "mutants.py"
NOT_GRADING = frozenset({CATALOGUE, "answers.toml"})  # reference/<id>/ files no grading reads as such


@functools.lru_cache(maxsize=1)
def grader_digest() -> str:
    """The grader's own source (every module of the package): a change to it may change any result."""
    package = Path(__file__).resolve().parents[1]
    return tree_digest({name: path for name, path in tree_files(package, package.parent).items()
                        if name.endswith(".py")}, f"grader {__version__}\n")


def environment_text() -> str:
    """What else decides a result: the interpreter and libraries, and whether kernels are interpreted."""
    import torch

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:  # pragma: no cover - Triton ships with the grader's requirements
        triton_version = "none"
    return (f"python {platform.python_version()} torch {torch.__version__} triton {triton_version} "
            f"cuda {torch.cuda.is_available()} interpret {os.environ.get('TRITON_INTERPRET', '')}")


def _digest(parts: list[tuple[str, str | bytes]]) -> str:
    hasher = hashlib.sha256()
    for name, value in parts:
        data = value.encode("utf-8") if isinstance(value, str) else value
        hasher.update(f"{name}\0{len(data)}\0".encode())
        hasher.update(data)
    return hasher.hexdigest()


def _read(path: Path | None) -> bytes:
    return path.read_bytes() if path is not None and path.is_file() else b""


def shared_catalogue(text: str) -> str:
    """mutants.py without its mutants: the imports and helpers every mutant may use."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.splitlines()
    drop: set[int] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                "mutant" in ast.unparse(d) for d in node.decorator_list):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            drop.update(range(first, node.end_lineno + 1))
    return "\n".join(line for number, line in enumerate(lines, start=1) if number not in drop)


def mutant_text(mutant: Mutant) -> str:
    return json.dumps([mutant.id, mutant.function, mutant.title, mutant.section, mutant.explanation,
                       mutant.source(), repr(mutant.vary), [list(p) for p in mutant.patch]])


@dataclass
class Fingerprints:
    """The fingerprints of one assignment's gradings (its shared parts read once)."""

    assignment: Assignment
    mutants: list[Mutant]
    _base: dict[str, str] = field(default_factory=dict)

    def _suite_base(self, suite: str) -> str:
        if suite in self._base:
            return self._base[suite]
        assignment, course = self.assignment, self.assignment.course
        parts: list[tuple[str, str | bytes]] = [
            ("scheme", CACHE_SCHEME), ("grader", grader_digest()), ("environment", environment_text()),
            ("manifest", _read(assignment.folder / "assignment.toml")), ("quiz", _read(assignment.quiz_questions)),
            ("contract", _read(assignment.contract_module)), ("suite", suite)]
        kernels = course.kernels_dir
        if kernels.is_dir():
            parts.append(("course_kernels", tree_digest(tree_files(kernels, course.root))))
        tests = assignment.public_tests if suite == "public" else assignment.hidden_tests
        parts.append(("tests", tree_digest(tree_files(tests, course.root)) if tests.is_dir() else ""))
        if suite in ("hidden", "degenerate"):
            reference = {name: path for name, path in tree_files(assignment.reference, course.root).items()
                         if Path(name).name not in NOT_GRADING and "similarity_sources" not in Path(name).parts}
            parts += [("reference", tree_digest(reference)), ("key", _read(assignment.quiz_key)),
                      ("catalogue", shared_catalogue(_read(assignment.reference / CATALOGUE).decode("utf-8",
                                                                                                 "replace")))]
        self._base[suite] = _digest(parts)
        return self._base[suite]

    def catalogue_slice(self, mutant: Mutant) -> str:
        """The mutants that can name this mutant's failures: those of its task's functions and uses."""
        manifest = self.assignment.manifest
        task = manifest.task_for_function(mutant.function)
        functions = {mutant.function, *(task.functions if task else ()), *(task.uses if task else ())}
        return "\n".join(mutant_text(m) for m in self.mutants if m.function in functions)

    def grading(self, suite: str, seed: int, files_sha256: str, mutant: Mutant | None) -> str:
        parts: list[tuple[str, str | bytes]] = [("base", self._suite_base(suite)), ("seed", str(seed)),
                                                 ("files", files_sha256)]
        if mutant is not None and suite == "hidden":
            parts.append(("catalogue slice", self.catalogue_slice(mutant)))
        return _digest(parts)

    def degenerate(self, seed: int) -> str:
        return _digest([("base", self._suite_base("degenerate")), ("seed", str(seed))])


class ValidateCache:
    """One assignment's cache (see the module docstring); `enabled=False` reads nothing and keeps nothing."""

    def __init__(self, assignment: Assignment, enabled: bool = True):
        self.folder = assignment.course.state_dir / "validate" / assignment.id
        self.enabled = enabled
        self.used: set[str] = set()

    def get(self, key: str) -> dict | None:
        self.used.add(key)
        if not self.enabled:
            return None
        path = self.folder / f"{key}.json"
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            os.utime(path)  # used now: kept by the next prune
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and entry.get("key") == key else None

    def put(self, key: str, entry: dict) -> None:
        self.used.add(key)
        if self.enabled:
            write_atomic(self.folder / f"{key}.json", json.dumps({**entry, "key": key}))

    def prune(self, now: float | None = None) -> int:
        """Remove the entries no run used for KEEP_UNUSED_S (call after a full run only); how many went."""
        if not self.enabled or not self.folder.is_dir():
            return 0
        now = time.time() if now is None else now
        removed = 0
        for path in self.folder.glob("*.json"):
            try:
                stale = path.stem not in self.used and now - path.stat().st_mtime > KEEP_UNUSED_S
            except OSError:
                continue
            if stale:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

"""The workspaces `grade validate` grades as submissions: the reference solution, and the reference with
one mutant swapped in (its source appended to the module that defines its function and the name rebound
to it, or, for a kernel mistake, its patch applied to the reference's kernel file). Each carries the quiz
key's answers, so it is a complete submission."""

from __future__ import annotations

import ast
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.compat import tomllib
from grader.core.manifest import Manifest
from grader.core.quiz import ANSWERS_FILE
from grader.harness.catalogue import Mutant


def reference_answers(assignment: Assignment) -> str:
    """answers.toml text holding the quiz key's answers."""
    key_path = assignment.quiz_key
    if not key_path.is_file():
        return ""
    answers = tomllib.loads(key_path.read_text(encoding="utf-8")).get("answers", {})
    lines = []
    for question, answer in answers.items():
        value = answer["value"] if isinstance(answer, dict) else answer
        lines.append(f"{question} = {value!r}" if not isinstance(value, str) else f'{question} = "{value}"')
    return "\n".join(lines) + "\n"


def defining_file(manifest: Manifest, reference_dir: Path, function: str) -> str:
    """The reference file that defines `function` (a launcher's mistakes live in the kernel file);
    ValueError when none does."""
    if manifest.is_launcher(function):  # a kernel mistake lives in the kernel file
        return manifest.contract.file
    for filename in manifest.files:
        tree = ast.parse((reference_dir / filename).read_text(encoding="utf-8"))
        if any(isinstance(n, ast.FunctionDef) and n.name == function for n in tree.body):
            return filename
    raise ValueError(f"no reference module defines {function}")


def patched(mutant: Mutant, text: str, filename: str) -> str:
    """`text` with the mutant's patch applied; ValueError unless every old text is there exactly once."""
    for old, new in mutant.patch:
        found = text.count(old)
        if found != 1:
            raise ValueError(f"mutant {mutant.id}'s patch does not apply to the reference's {filename}: "
                             f"{old!r} is there {found} times, not once")
        text = text.replace(old, new)
    return text


def reference_workspace(assignment: Assignment, target: Path, mutant: Mutant | list[Mutant] | None = None) -> Path:
    """The reference solution as a student workspace, with mutants (if any) swapped in."""
    manifest, reference_dir = assignment.manifest, assignment.reference
    target.mkdir(parents=True, exist_ok=True)
    for filename in manifest.files:
        (target / filename).write_text((reference_dir / filename).read_text(encoding="utf-8"), encoding="utf-8")
    (target / ANSWERS_FILE).write_text(reference_answers(assignment), encoding="utf-8")
    for one in [mutant] if isinstance(mutant, Mutant) else (mutant or []):
        filename = defining_file(manifest, reference_dir, one.function)
        if one.patch:
            text = (target / filename).read_text(encoding="utf-8")
            (target / filename).write_text(patched(one, text, filename), encoding="utf-8")
            continue
        with open(target / filename, "a", encoding="utf-8") as fh:
            fh.write(f"\n\n# --- mutant {one.id}\n{one.source()}\n"
                     f"{one.function} = {one.fn.__name__}\n")
    return target

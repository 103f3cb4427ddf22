"""Static checks of the submitted source: syntax, forbidden APIs, evasion, Triton launches.

This is the authority on what a submission calls: the run-time detectors run in
the student's own process and are hints only.

Every submitted .py file is parsed (not only the manifest's files). Imports between
the student's own modules are resolved (`import helpers`, `from helpers import f`,
`from . import x`), and each finding is attributed to the tasks that can reach it:

* a *unit* is a function (top-level or a method), a class body, the value of a
  module-level assignment, or a module's import-time code;
* a task reaches the units of its entry functions (the manifest's `functions`,
  and `uses` for functions it shares with another task), then everything those
  units name: functions, classes (a class named by reachable code brings all its
  methods in, so `Fn.apply(...)` reaches `Fn.forward` and `Fn.backward`),
  aliases, across modules; writing into a module-level name (`global x`,
  `helpers.f = g`, `CACHE.append(g)`) makes the writer part of that name;
* import-time code (module-level statements, decorators) of every manifest module
  and of every student module imported from reached code counts for every task,
  because the sandbox imports all of them before any call. Code under
  `if __name__ == "__main__":` never runs on import and is skipped;
* a class or function that no task reaches counts against no task.

Aliases (`import torch.nn.functional as F`, `from torch import softmax as s`,
`sm = torch.softmax`) are resolved. Code inside `@triton.jit` kernels is not torch
code and is skipped for the matmul group. The evasion table, the API groups and
the course's own modules are in `grader.sandbox.forbidden`.

A task with `requires = ["triton_launch"]` must reach, from each of its entry
functions (with everything the name may be bound to), a launch `kernel[grid](...)`
of a @triton.jit function defined in the submitted files. That proves a kernel of
the student's own can run, not that it computes the result: the tests' run-time
launch count and their comparison with the reference remain the second line.
"""

from __future__ import annotations

import sys

from grader.core.compat import with_deep_stack
from grader.core.manifest import Manifest, Task
from grader.core.records import StaticFinding
from grader.intake.kernels import kernel_module, scan_module, vet_kernel
from grader.intake.source_program import Program, SourceProblem, module_name_of
from grader.intake.static_rules import read_program
from grader.sandbox.forbidden import COURSE_CODE, EVASION, KERNEL_CODE, NO_TRITON_LAUNCH

RECURSION_LIMIT = 20_000  # the walk recurses once per nesting level of an expression

__all__ = ["SourceProblem", "check_sources"]


def _launched_kernel_findings(program: Program, reached: set[tuple[str, str]], task_id: str, function: str,
                              seen: set[tuple[str, str, int]]) -> list[StaticFinding]:
    """kernel_code findings in the @triton.jit kernels a task's code reaches (it launches them)."""
    findings = []
    for module_name, unit_name in sorted(reached):
        unit = program.units[(module_name, unit_name)]
        if not unit.kernel:
            continue
        module = program.modules[module_name]
        scope = scan_module(module.tree)
        if unit_name not in scope.jit:
            continue
        for problem in vet_kernel(scope, unit_name)[0]:
            if (KERNEL_CODE, module.filename, problem.line) not in seen:
                seen.add((KERNEL_CODE, module.filename, problem.line))
                findings.append(StaticFinding(task_id, function, KERNEL_CODE, problem.line,
                                              f"{module.filename}: {problem.text}"))
    return findings


def _contract_findings(manifest: Manifest, sources: dict[str, str]) -> list[StaticFinding]:
    """kernel_code findings in the kernels a task is graded on through the kernel contract: the
    grader launches them itself, in a worker that holds nothing else of the submission."""
    contract = manifest.contract
    if contract is None or contract.file not in sources:
        return []
    findings = []
    for task in manifest.tasks:
        kernels = manifest.kernels_for(task)
        if not kernels:
            continue
        for problem in kernel_module(contract.file, sources[contract.file], kernels).problems:
            findings.append(StaticFinding(task.id, problem.kernel, KERNEL_CODE, problem.line,
                                          f"{contract.file}: {problem.text}"))
    return findings


def _task_groups(task: Task) -> set[str]:
    """The groups that make `task` earn 0 when its code reaches them."""
    groups = set(task.forbidden)
    if task.forbidden or task.requires:
        groups.add(EVASION)
    return groups


def check_sources(manifest: Manifest, sources: dict[str, str],
                  other_files: tuple[str, ...] = ()) -> tuple[list[StaticFinding], list[SourceProblem]]:
    """Findings per task over every submitted .py file, and files that do not parse.

    `sources` maps each submitted .py path to its text; `other_files` names the rest of
    the submission (a compiled module shadows a source file of the same name)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        return with_deep_stack(_check, manifest, sources, other_files)
    finally:
        sys.setrecursionlimit(limit)


def _check(manifest: Manifest, sources: dict[str, str],
           other_files: tuple[str, ...]) -> tuple[list[StaticFinding], list[SourceProblem]]:
    program = read_program(sources, other_files)
    manifest_modules = []
    for filename in manifest.files:
        named = module_name_of(filename)
        if named and named[0] in program.modules and named[0] not in manifest_modules:
            manifest_modules.append(named[0])
    owners = {f: t for t in manifest.tasks for f in t.functions}

    def entry_bindings(function: str) -> list[list[tuple[str, str]]]:
        """What the sandbox may find under `function`: one list of units per binding."""
        found: list[list[tuple[str, str]]] = []
        for module_name in manifest_modules:
            for group in program.bindings_of(module_name, function):
                if group not in found:
                    found.append(group)
        return found

    at_import = program.closure([(m, "<module>") for m in manifest_modules])
    findings: list[StaticFinding] = []
    everything: set[tuple[str, str]] = set(at_import)
    for task in manifest.tasks:
        seen: set[tuple[str, str, int]] = set()
        entries = [(f, _task_groups(task)) for f in task.functions]
        for used in task.uses:
            owner = owners.get(used)
            entries.append((used, _task_groups(task) | (_task_groups(owner) if owner else set())))
        for function, groups in entries:
            bindings = entry_bindings(function)
            if not bindings:
                continue
            entry_file = program.units[bindings[0][0]].filename
            reached = program.closure([k for group in bindings for k in group]) | at_import
            everything |= reached
            for key in sorted(reached):
                unit = program.units[key]
                for h in unit.hits:
                    if h.group not in groups or (h.group == "matmul" and unit.kernel):
                        continue
                    if (h.group, h.filename, h.line) in seen:
                        continue
                    seen.add((h.group, h.filename, h.line))
                    code = h.code if h.filename == entry_file else f"{h.filename}: {h.code}"
                    holder = unit.key[1] if unit.key[1] not in (function, "<module>") else ""
                    findings.append(StaticFinding(task.id, function, h.group, h.line, code, holder))
            if "triton_launch" in task.requires:
                findings += _launched_kernel_findings(program, reached, task.id, function, seen)
                if not program.launches_kernel(program.closure([k for group in bindings for k in group])):
                    unit = program.units[bindings[0][0]]
                    findings.append(StaticFinding(
                        task.id, function, NO_TRITON_LAUNCH, unit.line,
                        f"{unit.filename}: {function} reaches no kernel[grid](...) launch of a "
                        f"@triton.jit kernel"))
    findings += _contract_findings(manifest, sources)
    for task in manifest.tasks:
        if EVASION in _task_groups(task):
            for filename in program.unreadable:
                findings.append(StaticFinding(task.id, "", EVASION, 1, f"{filename}: nested too deeply "
                                                                        f"for the grader to check"))
    course = sorted({h for key in everything for h in program.units[key].hits if h.group == COURSE_CODE},
                    key=lambda h: (h.filename, h.line, h.code))
    for task in manifest.tasks:
        for h in course:
            findings.append(StaticFinding(task.id, "", COURSE_CODE, h.line, f"{h.filename}: {h.code}"))
    return findings, program.problems

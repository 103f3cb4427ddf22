"""The course's kernel launchers (an assignment's contract module), bound to a set of kernels.

A kernel contract (grader.core.manifest.KernelContract) names a module of the
course, e.g. assignments/assignment3/contract.py, whose launchers `import flash`
and launch `flash._flash_fwd_kernel` into buffers they allocate. Where the
launchers run decides which `flash` they get:

* in the kernel worker (grading): the student's vetted kernels only
  (grader.intake.kernels), imported there as the student's file;
* in the trusted process: the reference's module, for expected values;
* in plain pytest (InProcessRunner): the workspace's own module.

`load_launchers` imports the contract module with the kernel module's name bound to
the module given, without leaving that binding in sys.modules.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from grader.core.manifest import KernelContract

_counter = itertools.count()


def kernel_module_name(contract: KernelContract) -> str:
    """The name the launchers import the student's kernel file by ("flash" for flash.py)."""
    return Path(contract.file).stem


def load_launchers(contract: KernelContract, module_path: Path, kernels: ModuleType) -> dict[str, Callable]:
    """The contract's launchers (name → function), importing `kernels` wherever they import the
    student's kernel file."""
    name = kernel_module_name(contract)
    spec = importlib.util.spec_from_file_location(f"_grade_contract_{next(_counter)}", module_path)
    module = importlib.util.module_from_spec(spec)
    saved = sys.modules.get(name)
    sys.modules[name] = kernels
    try:
        spec.loader.exec_module(module)
    finally:
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved
    return {launcher: getattr(module, launcher) for launcher in contract.launcher_names
            if callable(getattr(module, launcher, None))}

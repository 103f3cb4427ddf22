"""A contract kernel is vetted by resolving every name in it against the installed Triton
(grader.intake.kernels, grader.intake.triton_table): what reaches Python through a module that
triton.language re-exports, a builtin, a dunder or a rebound import is a named finding."""

from __future__ import annotations

import importlib

import pytest
import triton

from grader.core.manifest import load_manifest
from grader.intake.kernels import DECORATOR, PRIVATE, REBOUND, UNRESOLVED, kernel_module
from grader.intake.static_checks import check_sources
from grader.intake.triton_table import NAMESPACE, triton_table
from tests.conftest import ROOT

HEADER = "import math\nimport triton\nimport triton.language as tl\n"
KERNEL = "@triton.jit\ndef _flash_fwd_kernel(Q, K, N, BLOCK_M: tl.constexpr):\n"

# name → (source after the imports, (line, kind) of the first problem)
REFUSED = {
    "tl.math.core reaches builtins": (KERNEL + "    tl.math.core.builtins.exec('x = 1')\n", (6, UNRESOLVED)),
    "tl.math.core reaches inspect": (KERNEL + "    f = tl.math.core.inspect.currentframe()\n", (6, UNRESOLVED)),
    "tl.extra reaches pkgutil": (KERNEL + "    tl.extra.pkgutil.resolve_name('os')\n", (6, UNRESOLVED)),
    "functools re-exported by tl.math": (KERNEL + "    tl.math.wraps(tl.load)\n", (6, UNRESOLVED)),
    "a constant rebinds tl": ("tl = tl.math.core\n" + KERNEL + "    tl.builtins.exec('1')\n", (6, REBOUND)),
    "a function rebinds tl through global": ("def f():\n    global tl\n    tl = 3\n" + KERNEL + "    tl.load(Q)\n",
                                             (8, REBOUND)),
    "a rebound jit helper": ("@triton.jit\ndef helper(x):\n    return x\nhelper = print\n" + KERNEL +
                             "    helper(Q)\n", (10, REBOUND)),
    "a module-level value holding a module": ("CORE = tl.math.core\n" + KERNEL + "    CORE.builtins.exec('1')\n",
                                              (7, UNRESOLVED)),
    "an import of triton.language.core": ("from triton.language import core as c\n" + KERNEL +
                                          "    c.builtins.exec('1')\n", (7, UNRESOLVED)),
    "an import of core's builtins": ("from triton.language.core import builtins as b\n" + KERNEL +
                                     "    b.exec('1')\n", (7, UNRESOLVED)),
    "exec at compile time": (KERNEL + "    exec('import os')\n", (6, UNRESOLVED)),
    "eval": (KERNEL + "    x = eval('1')\n", (6, UNRESOLVED)),
    "getattr": (KERNEL + "    x = getattr(tl, 'lo' + 'ad')\n", (6, UNRESOLVED)),
    "print": (KERNEL + "    print(Q)\n", (6, UNRESOLVED)),
    "open": (KERNEL + "    open('/tmp/x')\n", (6, UNRESOLVED)),
    "a frame walk from a function": (KERNEL + "    g = tl.load.__globals__\n", (6, PRIVATE)),
    "a frame walk from a tensor": (KERNEL + "    x = tl.program_id(0)\n    c = x.__class__\n", (7, PRIVATE)),
    "the interpreter's array": (KERNEL + "    a = Q.handle\n", (6, UNRESOLVED)),
    "a module as a value": (KERNEL + "    m = tl.math\n", (6, UNRESOLVED)),
    "an attribute of a jit function": ("@triton.jit\ndef helper(x):\n    return x\n" + KERNEL +
                                       "    f = helper.fn\n", (9, UNRESOLVED)),
    "autotune": ("@triton.autotune(configs=[], key=[])\n" + KERNEL + "    pass\n", (6, DECORATOR)),
    "heuristics": ("@triton.heuristics({'BLOCK_M': lambda a: 64})\n" + KERNEL + "    pass\n", (6, DECORATOR)),
}

ACCEPTED = {
    "libdevice": KERNEL + "    x = tl.extra.cuda.libdevice.exp(tl.load(Q))\n",
    "math constants and dtypes": "SCALE = math.log2(math.e)\nLIMIT = tl.constexpr(2 * 64)\n" + KERNEL +
                                 "    x = tl.load(Q).to(Q.dtype.element_ty) * SCALE\n"
                                 "    y = tl.maximum(x, x, propagate_nan=tl.PropagateNan.ALL)\n"
                                 "    z = tl.zeros([BLOCK_M], tl.float32) + LIMIT + tl.float16.primitive_bitwidth\n",
    "an inner jit function": "@triton.jit\ndef _inner(Q, N, BLOCK_M: tl.constexpr):\n"
                             "    tl.store(Q, tl.load(Q))\n" + KERNEL + "    _inner(Q, N, BLOCK_M)\n",
    "loops and builtins": KERNEL + "    for i in tl.range(0, N, BLOCK_M):\n        x = min(i, N) + len([1])\n"
                                   "    for j in range(0, N):\n"
                                   "        y = float('-inf') + int(1.0) + triton.cdiv(N, 2)\n",
    # an API this Triton lacks fails at run time with Triton's own error (and its explanation)
    "an API missing from this Triton": KERNEL + "    p = tl.not_an_operation_of_triton(Q)\n",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_reaches_python_is_a_named_finding(name: str) -> None:
    source, (line, kind) = REFUSED[name]
    module = kernel_module("flash.py", HEADER + source, ("_flash_fwd_kernel",))
    assert module.problems, name
    first = module.problems[0]
    assert (first.line, first.kind) == (line, kind), first
    assert first.kernel in ("_flash_fwd_kernel", "helper")


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_triton_by_resolution_is_accepted(name: str) -> None:
    module = kernel_module("flash.py", HEADER + ACCEPTED[name], ("_flash_fwd_kernel",))
    assert module.problems == () and module.found == ("_flash_fwd_kernel",)


def test_a_decorator_finding_says_what_to_do_instead() -> None:
    source, _ = REFUSED["autotune"]
    text = kernel_module("flash.py", HEADER + source, ("_flash_fwd_kernel",)).problems[0].text
    assert "plain @triton.jit" in text and "BLOCK_M" in text and "GPU" in text


def test_the_inner_jit_adapter_fixture_is_kept_whole() -> None:
    text = (ROOT / "tests" / "fixtures" / "triton_kernels" / "inner_jit_adapter.py").read_text()
    module = kernel_module("flash.py", text, ("_flash_fwd_kernel",))
    assert module.problems == ()
    assert "def _attention_rows(" in module.source and "def _flash_fwd_kernel(" in module.source


def test_the_table_is_read_from_the_installed_triton() -> None:
    table = triton_table()
    assert table.version == triton.__version__
    for path, kind in table.paths.items():  # every path names a real object, every namespace a module of Triton's
        obj = importlib.import_module("triton")
        for part in path.split(".")[1:]:
            obj = getattr(obj, part)
        if kind == NAMESPACE:
            assert obj.__name__.startswith("triton"), path
    assert "triton.language.load" in table.paths and table.paths["triton.language"] == NAMESPACE
    for reexported in ("triton.language.math.core", "triton.language.core", "triton.language.extra.pkgutil"):
        assert reexported not in table.paths
    assert "handle" not in table.value_attributes and "element_ty" in table.value_attributes


def test_a_finding_costs_every_kernel_task() -> None:
    manifest = load_manifest(ROOT / "assignments" / "assignment3" / "assignment.toml")
    reference = (ROOT / "reference" / "assignment3" / "flash.py").read_text()
    line = "    pid_m = tl.program_id(0)\n"
    attack = reference.replace(line, line + "    tl.math.core.builtins.exec('x = 1')\n", 1)
    sources = {"flash.py": attack, "efficient.py": (ROOT / "reference/assignment3/efficient.py").read_text()}
    findings, _ = check_sources(manifest, sources)
    kernel_tasks = {f.task for f in findings if f.group == "kernel_code"}
    assert {"flash_forward", "flash_gqa", "flash_speed"} <= kernel_tasks
    assert all("triton.language.core" in f.code for f in findings if f.group == "kernel_code")
    # the allow-list of modules sees the same line from the host's side: builtins is no module a submission uses
    assert {(f.group, f.line) for f in findings if f.group != "kernel_code"} == {("evasion", 42)}

from __future__ import annotations

import importlib.util
import sys

import pytest

from grader.core.manifest import parse_manifest
from grader.intake.static_checks import check_sources

MANIFEST = parse_manifest({"id": "a", "files": ["a.py"], "tasks": [
    {"id": "soft", "points": 1, "functions": ["softmax"], "forbidden": ["softmax"]},
    {"id": "attn", "points": 1, "functions": ["attend"], "forbidden": ["softmax", "sdpa"]},
    {"id": "flash", "points": 1, "functions": ["flash"], "forbidden": ["matmul"]},
]})


def groups(source: str) -> set[tuple[str, str]]:
    findings, problems = check_sources(MANIFEST, {"a.py": source})
    assert not problems
    return {(f.task, f.group) for f in findings}


@pytest.mark.parametrize("source", [
    "import torch\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n",
    "import torch\ndef softmax(x, dim=-1):\n    return x.softmax(dim)\n",
    "import torch.nn.functional as F\ndef softmax(x, dim=-1):\n    return F.softmax(x, dim)\n",
    "from torch.nn.functional import softmax as s\ndef softmax(x, dim=-1):\n    return s(x, dim)\n",
    "import torch\nsm = torch.softmax\ndef softmax(x, dim=-1):\n    return sm(x, dim)\n",
    "import torch\ndef softmax(x, dim=-1):\n    return getattr(torch, 'log_softmax')(x, dim).exp()\n",
    "import torch\ndef softmax(x, dim=-1):\n    return torch.nn.Softmax(dim)(x)\n",
])
def test_softmax_in_every_disguise(source):
    assert ("soft", "softmax") in groups(source)


def test_helper_functions_do_not_hide_a_forbidden_call():
    source = ("import torch\n"
              "def _helper(s):\n    return torch.softmax(s, -1)\n"
              "def attend(q, k):\n    return _helper(q @ k.T)\n")
    assert groups(source) == {("attn", "softmax")}


def test_own_softmax_is_allowed():
    source = ("import torch\n"
              "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
              "    return e / e.sum(dim, keepdim=True)\n"
              "def attend(q, k):\n    return softmax(q @ k.T)\n")
    assert groups(source) == set()


def test_sdpa_found():
    source = ("import torch.nn.functional as F\n"
              "def attend(q, k):\n    return F.scaled_dot_product_attention(q, k, k)\n")
    assert groups(source) == {("attn", "sdpa")}


def test_matmul_outside_kernels_only():
    source = ("import torch\nimport triton\nimport triton.language as tl\n"
              "@triton.jit\ndef _kernel(a, b):\n    c = a @ b\n"
              "def flash(q, k):\n    _kernel[(1,)](q, k)\n    return q\n")
    assert groups(source) == set()
    assert groups("import torch\ndef flash(q, k):\n    return q @ k.transpose(-2, -1)\n") == {("flash", "matmul")}
    einsum = "import torch\ndef flash(q, k):\n    return torch.einsum('id,jd->ij', q, k)\n"
    assert groups(einsum) == {("flash", "matmul")}


def test_syntax_errors_are_reported_not_raised():
    findings, problems = check_sources(MANIFEST, {"a.py": "def softmax(x)\n  return x\n"})
    assert findings == [] and problems and "line 1" in problems[0].message


# ----------------------------------------------------------------------------------------------
# Every submitted file, reachability, evasion, the course's own code, numpy, Triton launches.

from pathlib import Path  # noqa: E402

from grader.core.course import Course  # noqa: E402
from grader.core.manifest import load_manifest  # noqa: E402
from tests.conftest import FIXTURES, ROOT, grade_workspace  # noqa: E402

FULL = parse_manifest({"id": "a", "files": ["a.py"], "tasks": [
    {"id": "soft", "points": 1, "functions": ["softmax"], "forbidden": ["softmax", "numpy"]},
    {"id": "attn", "points": 1, "functions": ["attend"], "forbidden": ["softmax", "sdpa"]},
    {"id": "flash", "points": 1, "functions": ["flash"], "forbidden": ["matmul"],
     "requires": ["triton_launch"]},
    {"id": "free", "points": 1, "functions": ["free"]},
    {"id": "quiz", "points": 1, "kind": "quiz"},
]})

KERNEL = ("import torch\nimport triton\nimport triton.language as tl\n\n"
          "@triton.jit\ndef _copy(X, Y, n, BLOCK: tl.constexpr):\n"
          "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
          "    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)\n\n")
LAUNCH = "    y = torch.empty_like(x)\n    _copy[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)\n"


def found(source: str, files: dict[str, str] | None = None, manifest=FULL,
          other_files: tuple[str, ...] = ()) -> set[tuple[str, str]]:
    findings, problems = check_sources(manifest, {"a.py": source, **(files or {})}, other_files)
    assert not problems
    return {(f.task, f.group) for f in findings}


EVASIONS = {
    "torch._C": "import torch\ndef softmax(x, dim=-1):\n    with torch._C.DisableTorchFunction():\n"
                "        return x.exp()\n",
    "torch._C import": "from torch._C import DisableTorchFunction as D\ndef softmax(x, dim=-1):\n"
                       "    with D():\n        return x.exp()\n",
    "torch.ops": "import torch\ndef softmax(x, dim=-1):\n    return torch.ops.aten.exp(x)\n",
    "torch._dynamo": "import torch._dynamo\ndef softmax(x, dim=-1):\n    return torch._dynamo.disable(x.exp)()\n",
    "torch.library": "import torch\ndef softmax(x, dim=-1):\n    return torch.library.Library\n",
    "torch.overrides": "from torch.overrides import TorchFunctionMode\ndef softmax(x, dim=-1):\n"
                       "    with TorchFunctionMode():\n        return x\n",
    "_python_dispatch": "from torch.utils._python_dispatch import _disable_current_modes\n"
                        "def softmax(x, dim=-1):\n    with _disable_current_modes():\n        return x\n",
    "private torch name": "import torch\ndef softmax(x, dim=-1):\n    return torch._foreach_exp([x])[0]\n",
    "torch.compile": "import torch\ndef softmax(x, dim=-1):\n    return torch.compile(lambda t: t.exp())(x)\n",
    "vars": "import torch\ndef softmax(x, dim=-1):\n    return vars(torch)['ex' + 'p'](x)\n",
    "globals": "def softmax(x, dim=-1):\n    return globals()['torch'].exp(x)\n",
    "locals": "def softmax(x, dim=-1):\n    return locals()['x'].exp()\n",
    "__dict__": "import torch\ndef softmax(x, dim=-1):\n    return torch.__dict__['exp'](x)\n",
    "getattr computed": "import torch\ndef softmax(x, dim=-1):\n    name = 'e'\n"
                        "    return getattr(torch, name + 'xp')(x)\n",
    "getattr passed around": "import torch\ndef softmax(x, dim=-1):\n    get = getattr\n"
                             "    return get(torch, 'exp')(x)\n",
    "setattr computed": "import torch\ndef softmax(x, dim=-1):\n    n = 'f'\n    setattr(torch, n, x)\n"
                        "    return x\n",
    "delattr computed": "import torch\ndef softmax(x, dim=-1):\n    n = 'f'\n    delattr(torch, n)\n    return x\n",
    "hasattr computed": "import torch\ndef softmax(x, dim=-1):\n    n = 'f'\n"
                        "    return x if hasattr(torch, n) else x\n",
    "attrgetter computed": "import operator, torch\ndef softmax(x, dim=-1):\n    n = 'exp'\n"
                           "    return operator.attrgetter(n)(torch)(x)\n",
    "methodcaller computed": "from operator import methodcaller\ndef softmax(x, dim=-1):\n    n = 'exp'\n"
                             "    return methodcaller(n)(x)\n",
    "importlib": "import importlib\ndef softmax(x, dim=-1):\n    return importlib.import_module('torch').exp(x)\n",
    "__import__": "def softmax(x, dim=-1):\n    return __import__('torch').exp(x)\n",
    "eval": "def softmax(x, dim=-1):\n    return eval('x.exp()')\n",
    "exec": "def softmax(x, dim=-1):\n    exec('y = x.exp()')\n    return x\n",
    "compile": "def softmax(x, dim=-1):\n    return compile('1', 'f', 'eval')\n",
    "sys.modules": "import sys\ndef softmax(x, dim=-1):\n    return sys.modules['torch'].exp(x)\n",
    "sys._getframe": "import sys\ndef softmax(x, dim=-1):\n    return sys._getframe(1).f_locals\n",
    "gc": "import gc\ndef softmax(x, dim=-1):\n    return [o for o in gc.get_objects()][0]\n",
    "inspect": "import inspect\ndef softmax(x, dim=-1):\n    return inspect.currentframe()\n",
    "ctypes": "import ctypes\ndef softmax(x, dim=-1):\n    return ctypes.c_int(1)\n",
    "marshal": "import marshal\ndef softmax(x, dim=-1):\n    return marshal.loads(b'')\n",
    "pickle": "import pickle\ndef softmax(x, dim=-1):\n    return pickle.loads(b'')\n",
    "subprocess": "import subprocess\ndef softmax(x, dim=-1):\n    subprocess.run(['true'])\n    return x\n",
    "builtins": "import builtins\ndef softmax(x, dim=-1):\n    return builtins.getattr(x, 'exp')()\n",
    "f_back": "def softmax(x, dim=-1, frame=None):\n    return frame.f_back\n",
    "tb_frame": "def softmax(x, dim=-1):\n    try:\n        raise ValueError\n    except ValueError as e:\n"
                "        return e.__traceback__.tb_frame\n",
    "gi_frame": "def softmax(x, dim=-1):\n    g = (i for i in x)\n    return g.gi_frame\n",
    "__globals__": "def softmax(x, dim=-1):\n    return softmax.__globals__['torch'].exp(x)\n",
    "__code__": "def softmax(x, dim=-1):\n    return softmax.__code__\n",
    "__closure__": "def softmax(x, dim=-1):\n    return softmax.__closure__\n",
    "__builtins__": "def softmax(x, dim=-1):\n    return __builtins__\n",
    "__subclasses__": "def softmax(x, dim=-1):\n    return object.__subclasses__()\n",
    "__bases__/__mro__": "def softmax(x, dim=-1):\n    return type(x).__mro__, type(x).__bases__\n",
    "__getattribute__": "import torch\ndef softmax(x, dim=-1):\n    return object.__getattribute__(torch, 'exp')(x)\n",
    "__class__ chain": "def softmax(x, dim=-1):\n    return x.__class__.__base__\n",
    "compiled module": "import helpers\ndef softmax(x, dim=-1):\n    return helpers.f(x)\n",
    "module nobody handed in": "import made_at_run_time\ndef softmax(x, dim=-1):\n    return made_at_run_time.f(x)\n",
    "library the grader cannot read": "import transformers\ndef softmax(x, dim=-1):\n    return transformers.x(x)\n",
    "shadowed only elsewhere": "import torch\ndef softmax(x, dim=-1):\n    def inner(vars):\n        return vars\n"
                               "    return vars(torch)['exp'](x)\n",
    "star import keeps builtins": "from math import *\nimport torch\ndef softmax(x, dim=-1):\n"
                                 "    return vars(torch)['exp'](x)\n",
}


@pytest.mark.parametrize("form", sorted(EVASIONS))
def test_every_evasion_form_is_a_finding(form):
    files = {"helpers.py": "def f(x):\n    return x\n"} if form == "compiled module" else None
    other = ("helpers.cpython-311-x86_64-linux-gnu.so",) if form == "compiled module" else ()
    assert found(EVASIONS[form], files, other_files=other) == {("soft", "evasion")}


def test_evasion_only_counts_for_tasks_with_a_forbidden_list():
    assert found("import inspect\ndef free(x):\n    return inspect.currentframe()\n") == set()


def test_an_unused_import_of_an_evasion_module_costs_nothing():
    """Importing ctypes does nothing; using it where a from-scratch task reaches it does."""
    source = "import ctypes\nimport torch._C\ndef free(x):\n    return ctypes.string_at(0)\ndef softmax(x, dim=-1):\n"
    assert found(source + "    return x.exp()\n") == set()
    assert found(source + "    return free(x)\n") == {("soft", "evasion")}


@pytest.mark.parametrize("source, group", [
    ("import torch.nn.functional as F\ndef softmax(x, dim=-1):\n    return getattr(F, 'softmax')(x, dim)\n",
     set()),
    ("import torch\ndef softmax(x, dim=-1):\n    return vars(torch)['softmax'](x, dim)\n", {"evasion"}),
    ("import torch\ndef softmax(x, dim=-1):\n    return vars(torch)['soft' + 'max'](x, dim)\n", {"evasion"}),
    ("import torch\ndef softmax(x, dim=-1):\n    return torch.__dict__.get('softmax')(x, dim)\n", {"evasion"}),
    ("import importlib\ndef softmax(x, dim=-1):\n"
     "    return importlib.import_module('torch.nn.functional').softmax(x, dim)\n", {"evasion"}),
    ("import operator, torch\ndef softmax(x, dim=-1):\n"
     "    return operator.attrgetter('nn.functional.softmax')(torch)(x, dim)\n", set()),
    ("from operator import methodcaller\ndef softmax(x, dim=-1):\n    return methodcaller('softmax', dim)(x)\n",
     set()),
    ("import torch\ndef softmax(x, dim=-1):\n    with torch._C.DisableTorchFunction():\n"
     "        return vars(torch)['soft' + 'max'](x, dim)\n", {"evasion"}),
])
def test_literal_names_of_a_forbidden_function_count_in_its_own_group(source, group):
    assert found(source) == {("soft", "softmax")} | {("soft", g) for g in group}


def test_settings_named_like_a_group_are_not_calls():
    settings = ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = False\n" + KERNEL +
                "def flash(x):\n    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = True\n"
                + LAUNCH + "    return y\n")
    assert found(settings) == set()
    # the whole dotted name still counts: torch.softmax followed by anything is torch.softmax
    assert found("import torch\ndef softmax(x, dim=-1):\n    return torch.softmax.__call__(x, dim)\n") == {
        ("soft", "softmax")}


def test_literal_names_of_allowed_functions_are_fine():
    source = ("import operator, torch\n"
              "def softmax(x, dim=-1, eval=False):\n"
              "    e = getattr(torch, 'exp')(x - operator.attrgetter('values')(x.max(dim, keepdim=True)))\n"
              "    meta = {'BLOCK_M': 1}\n"
              "    print(type(x).__name__, x.__class__.__name__, meta['BLOCK_M'], hasattr(x, 'grad'))\n"
              "    return e / e.sum(dim, keepdim=True) if not eval else e\n")
    assert found(source) == set()


def test_a_helper_module_is_scanned_and_attributed_to_its_callers():
    helpers = {"helpers.py": "import torch\ndef sm(x):\n    return torch.softmax(x, -1)\n"
                             "def fine(x):\n    return x.exp()\n"}
    assert found("import helpers\ndef softmax(x, dim=-1):\n    return helpers.sm(x)\n"
                 "def attend(q, k):\n    return helpers.fine(q)\n", helpers) == {("soft", "softmax")}
    assert found("from helpers import sm as s\ndef attend(q, k):\n    return s(q)\n", helpers) == {
        ("attn", "softmax")}


def test_packages_and_relative_imports_are_followed():
    files = {"pkg/__init__.py": "", "pkg/inner.py": "from . import deep\ndef sm(x):\n    return deep.f(x)\n",
             "pkg/deep.py": "import torch.nn.functional as F\ndef f(x):\n    return F.softmax(x, -1)\n"}
    findings, _ = check_sources(FULL, {"a.py": "from pkg.inner import sm\ndef softmax(x, dim=-1):\n"
                                               "    return sm(x)\n", **files})
    assert [(f.task, f.group, f.code) for f in findings] == [("soft", "softmax", "pkg/deep.py: F.softmax")]


def test_own_functions_named_like_torch_functions_are_the_students_own():
    helpers = {"helpers.py": "def softmax(x):\n    e = x.exp()\n    return e / e.sum(-1, keepdim=True)\n"}
    assert found("import helpers\ndef attend(q, k):\n    return helpers.softmax(q)\n", helpers) == set()


def test_an_untaken_nanogpt_style_class_counts_against_no_task():
    source = ("import torch, torch.nn as nn, torch.nn.functional as F\n"
              "class CausalSelfAttention(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n"
              "        self.flash = hasattr(F, 'scaled_dot_product_attention')\n"
              "    def forward(self, q, k, v):\n"
              "        if self.flash:\n            return F.scaled_dot_product_attention(q, k, v)\n"
              "        return (q @ k.transpose(-2, -1)).softmax(-1) @ v\n"
              "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
              "    return e / e.sum(dim, keepdim=True)\n"
              "def attend(q, k):\n    return softmax(q @ k.T)\n")
    assert found(source) == set()
    reached = source.replace("return softmax(q @ k.T)", "return CausalSelfAttention()(q, k, k)")
    assert found(reached) == {("attn", "sdpa"), ("attn", "softmax")}


def test_methods_and_base_classes_of_a_reached_class_count():
    source = ("import torch\nclass Base:\n    def go(self, x):\n        return torch.softmax(x, -1)\n"
              "class Child(Base):\n    pass\ndef attend(q, k):\n    return Child().go(q)\n")
    assert found(source) == {("attn", "softmax")}


def test_module_level_code_counts_for_every_task_that_imports_it():
    assert found("import torch\n_T = torch.softmax(torch.zeros(2), 0)\n"
                 "def softmax(x, dim=-1):\n    return x\ndef attend(q, k):\n    return q\n") == {
        ("soft", "softmax"), ("attn", "softmax")}
    helpers = {"helpers.py": "import torch\n_T = torch.nn.functional.softmax(torch.zeros(2), 0)\n"
                             "def f(x):\n    return x\n"}
    source = "def softmax(x, dim=-1):\n    return x\ndef attend(q, k):\n    from helpers import f\n    return f(q)\n"
    assert found(source, helpers) == {("attn", "softmax")}  # imported only inside attend
    assert found("import helpers\n" + source, helpers) == {("soft", "softmax"), ("attn", "softmax")}
    # a module nobody imports never runs
    assert found(source.replace("from helpers import f", "f = abs"), helpers) == set()


@pytest.mark.parametrize("terms", [3000, 20000, 200000])
def test_code_too_deep_to_follow_is_refused_not_a_crash(terms):
    source = "import torch\ndef softmax(x, dim=-1):\n    return " + " + ".join(["x"] * terms) + "\n"
    findings, _ = check_sources(FULL, {"a.py": source})
    expected = set() if terms == 3000 else {("soft", "evasion"), ("attn", "evasion"), ("flash", "evasion")}
    if terms == 20000 or (terms == 200000 and sys.version_info < (3, 11)):
        # parsed, too deep to walk: the function is refused for every task that reaches it (Python 3.10's
        # parser, given a deep stack, still reads 200000 terms; 3.11's refuses the file, for every task)
        expected = {("soft", "evasion")}
    assert {(f.task, f.group) for f in findings} == expected


def test_code_under_the_main_guard_does_not_run_on_import():
    assert found("import torch\ndef softmax(x, dim=-1):\n    return x\n"
                 "if __name__ == '__main__':\n    print(torch.softmax(torch.zeros(2), 0))\n") == set()


def test_every_definition_of_a_name_is_checked():
    source = ("import torch\nif True:\n    def softmax(x, dim=-1):\n        return torch.softmax(x, dim)\n"
              "else:\n    def softmax(x, dim=-1):\n        return x\n")
    assert found(source) == {("soft", "softmax")}


def test_writes_into_module_level_names_are_followed():
    glob = ("import torch\n_F = None\ndef setup():\n    global _F\n    _F = torch.softmax\n"
            "def attend(q, k):\n    return _F(q)\n")
    assert found(glob) == {("attn", "softmax")}
    cache = ("import torch\nCACHE = []\ndef fill():\n    CACHE.append(torch.softmax)\n"
             "def attend(q, k):\n    return CACHE[0](q)\n")
    assert found(cache) == {("attn", "softmax")}
    helpers = {"helpers.py": "def f(x):\n    return x\n",
               "patch.py": "import torch\nimport helpers\ndef install():\n    helpers.f = torch.softmax\n"}
    assert found("import helpers, patch\ndef attend(q, k):\n    return helpers.f(q)\n", helpers) == {
        ("attn", "softmax")}


def test_grader_reference_and_kernels_imports_count_for_every_task():
    tasks = {t.id for t in FULL.tasks}
    for source in ("import grader.sandbox.facts as facts\ndef free(x):\n    facts._launches[0] += 1\n    return x\n",
                   "from reference.assignment1.attention import softmax\n",
                   "from course_kernels.flash_attention import attention\ndef free(x):\n    return x\n",
                   "import sys\ndef free(x):\n    return sys.modules['grader.sandbox.facts']\n"):
        assert {t for t, g in found(source) if g == "course_code"} == tasks, source
    # a file nothing imports (the student's own test, say) is not run by the grader
    assert found("def free(x):\n    return x\n", {"tests/test_mine.py": "import grader\n"}) == set()


def test_numpy_and_other_array_libraries_in_a_from_scratch_task():
    assert found("import numpy as np, torch\ndef softmax(x, dim=-1):\n"
                 "    return torch.from_numpy(np.exp(x.numpy()))\n") == {("soft", "numpy")}
    scipy = {("soft", "numpy")} | (set() if importlib.util.find_spec("scipy") else {("soft", "evasion")})
    assert found("from scipy.special import softmax as s\ndef softmax(x, dim=-1):\n    return s(x)\n") == scipy
    assert found("import numpy as np\ndef free(x):\n    return np.exp(x)\n") == set()  # not forbidden there
    assert found("import numpy as np\ndef attend(q, k):\n    return q\n") == set()  # imported, never used


def test_a_launch_through_an_autograd_function_is_found():
    source = KERNEL + ("class _Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n"
                       + LAUNCH.replace("    ", "        ") + "        return y\n"
                       "    @staticmethod\n    def backward(ctx, g):\n        return g\n"
                       "def flash(x):\n    return _Fn.apply(x)\n")
    assert found(source) == set()


def test_launches_through_helpers_modules_parameters_and_autotune_are_found():
    helper = "def _run(x):\n" + LAUNCH + "    return y\n"
    assert found(KERNEL + helper + "def flash(x):\n    return _run(x)\n") == set()
    assert found("import kern\ndef flash(x):\n    return kern._run(x)\n", {"kern.py": KERNEL + helper}) == set()
    param = KERNEL + ("def _go(kernel, x):\n    kernel[(1,)](x, x, x.numel(), BLOCK=64)\n    return x\n"
                      "def flash(x):\n    return _go(_copy, x)\n")
    assert found(param) == set()
    tuned = ("import torch, triton, triton.language as tl\n"
             "@triton.autotune(configs=[triton.Config({'BLOCK': 64})], key=['n'])\n@triton.jit\n"
             "def _k(X, n, BLOCK: tl.constexpr):\n    c = X @ X\n"
             "def flash(x):\n    grid = lambda meta: (triton.cdiv(x.numel(), meta['BLOCK']),)\n"
             "    _k[grid](x, x.numel())\n    return x\n")
    assert found(tuned) == set()  # `@` inside a kernel is Triton code, not a torch product


def test_a_decoy_launch_in_an_unrelated_function_does_not_count():
    source = KERNEL + "def decoy(x):\n" + LAUNCH + "def flash(x):\n    return x * 1\n"
    findings, _ = check_sources(FULL, {"a.py": source})
    assert [(f.task, f.group, f.function) for f in findings] == [("flash", "no_triton_launch", "flash")]
    assert "kernel[grid](...)" in findings[0].code


@pytest.mark.parametrize("source", [
    "import torch\ndef _k(*args, **kw):\n    pass\ndef flash(x):\n    _k[(1,)](x)\n    return x\n",
    KERNEL + "def flash(x):\n    table = [print]\n    table[0](x)\n    return x\n",
])
def test_no_launch_of_a_jit_kernel_is_a_finding(source):
    assert found(source) == {("flash", "no_triton_launch")}


REAL = {
    "assignment1": ("attention.py",),
    "assignment2": ("multihead.py", "positions.py"),
    "assignment3": ("efficient.py", "flash.py"),
}


def _sources(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text(encoding="utf-8")
            for p in folder.rglob("*.py") if "__pycache__" not in p.parts}


@pytest.mark.parametrize("assignment", sorted(REAL))
@pytest.mark.parametrize("where", ["reference", "assignments"])
def test_references_and_stubs_have_no_findings(assignment, where):
    manifest = load_manifest(ROOT / "assignments" / assignment / "assignment.toml")
    folder = ROOT / where / assignment
    sources = _sources(folder)
    assert set(REAL[assignment]) <= set(sources)
    assert check_sources(manifest, sources) == ([], [])
    for filename in REAL[assignment]:  # the task files alone, too
        assert check_sources(manifest, {f: sources[f] for f in REAL[assignment]})[0] == [], filename


def test_the_course_kernel_as_a_submission_has_no_findings():
    manifest = load_manifest(ROOT / "assignments" / "assignment3" / "assignment.toml")
    kernel = (ROOT / "course_kernels" / "flash_attention.py").read_text(encoding="utf-8")
    grads = (ROOT / "assignments" / "assignment3" / "flash.py").read_text(encoding="utf-8")
    grads = grads[grads.index("def flash_attention_grads"):]
    flash = (kernel + "\n\ndef flash_attention(q, k, v, causal=False, sm_scale=None):\n"
                      "    return attention(q, k, v, causal, sm_scale)\n\n\n" + grads)
    sources = {"flash.py": flash, "efficient.py": (ROOT / "reference/assignment3/efficient.py").read_text()}
    assert check_sources(manifest, sources) == ([], [])


def test_host_code_findings_cost_the_launcher_task_and_kernel_findings_every_task_of_the_kernel():
    manifest = load_manifest(ROOT / "assignments" / "assignment3" / "assignment.toml")
    sources = _sources(FIXTURES / "assignment3_cheat_sdpa")
    sources["efficient.py"] = (ROOT / "reference/assignment3/efficient.py").read_text()
    findings, _ = check_sources(manifest, sources)
    assert {(f.task, f.group) for f in findings} == {("flash_launcher", "sdpa")}  # host code: its own task
    torch_only = sources["flash.py"].replace("_copy_kernel[(triton.cdiv(result.numel(), 1024),)]",
                                             "_copy_kernel_launch")
    findings, _ = check_sources(manifest, {**sources, "flash.py": torch_only})
    assert {(f.task, f.group) for f in findings if f.group == "no_triton_launch"} == {
        ("flash_launcher", "no_triton_launch")}
    reference = (ROOT / "reference/assignment3/flash.py").read_text()
    first = "    m_i = tl.full([BLOCK_M], float(\"-inf\"), tl.float32)\n"
    python_inside = reference.replace(first, first + "    ok = len(sys.argv)\n", 1)
    findings, _ = check_sources(manifest, {**sources, "flash.py": "import sys\n" + python_inside})
    assert {(f.task, f.group) for f in findings} == {  # every task that launches the forward kernel
        ("flash_forward", "kernel_code"), ("flash_gqa", "kernel_code"), ("flash_speed", "kernel_code"),
        ("flash_launcher", "kernel_code"),
        ("flash_launcher", "evasion")}  # the host task reaches sys too, which is outside its allow-list
    assert {f.function for f in findings} == {"_flash_fwd_kernel", "flash_attention"}
    assert all("sys" in f.code for f in findings)


@pytest.mark.sandbox
def test_runtime_invisible_softmax_earns_zero_through_the_real_grader():
    """torch._C.DisableTorchFunction() hides the call from the run-time name recorder; the source does
    not, and neither does torch's dispatcher (the operation recorder sees _softmax)."""
    course = Course(ROOT)
    workspace = FIXTURES / "assignment1_disabled_torch_function"
    result = grade_workspace(course, "assignment1", workspace, seed=11)
    records = {t.task_id: (t.earned, t.passed, t.failed, t.status) for t in result.score.tasks}
    assert records == {
        "attention_scores": (10.0, 8, 0, "graded"), "scale_scores": (5.0, 7, 0, "graded"),
        "softmax": (0.0, 0, 13, "forbidden"), "causal_mask": (15.0, 8, 0, "graded"),
        "scaled_dot_product_attention": (0.0, 0, 19, "forbidden"), "quiz": (10.0, 8, 0, "graded")}
    assert {o.kind for o in result.outcomes if o.task in ("softmax", "scaled_dot_product_attention")} == {
        "forbidden"}
    assert {(f.task, f.group) for f in result.findings} == {
        ("softmax", "softmax"), ("softmax", "evasion"),
        ("scaled_dot_product_attention", "softmax"), ("scaled_dot_product_attention", "evasion")}
    softmax = next(t for t in result.score.tasks if t.task_id == "softmax")
    assert "softmax family" in softmax.reason and "cannot check" in softmax.reason


# ----------------------------------------------------------------------------------------------
# The allow-list: what a dotted name resolves to, stdlib routes from a string, rebinding, re-exports.

ALLOW_LIST_EVASIONS = {
    "pydoc.locate": "import pydoc\ndef softmax(x, dim=-1):\n"
                    "    return pydoc.locate('torch.sparse.' + 'soft' + 'max')(x, dim)\n",
    "pydoc switches": "import pydoc, torch\ndef softmax(x, dim=-1):\n"
                      "    with pydoc.locate('torch._C.' + 'DisableTorchFunction')():\n"
                      "        return torch.nn.functional.__dict__['soft' + 'max'](x, dim)\n",
    "from pydoc import locate": "from pydoc import locate as find\ndef softmax(x, dim=-1):\n"
                                "    return find('torch.exp')(x)\n",
    "timeit": "import timeit\ndef softmax(x, dim=-1):\n    out = {}\n"
              "    timeit.timeit('o[0] = t(x, d)', number=1, globals={'o': out, 't': 0, 'x': x, 'd': dim})\n"
              "    return out[0]\n",
    "runpy": "import runpy\ndef softmax(x, dim=-1):\n    return runpy.run_path('/tmp/a.py')['f'](x)\n",
    "pkgutil": "import pkgutil\ndef softmax(x, dim=-1):\n    return pkgutil.resolve_name('torch:exp')(x)\n",
    "code.InteractiveInterpreter": "import code\ndef softmax(x, dim=-1):\n"
                                   "    code.InteractiveInterpreter({'x': x}).runsource('x.exp()')\n    return x\n",
    "pdb": "import pdb\ndef softmax(x, dim=-1):\n    return pdb.Pdb\n",
    "typing.get_type_hints": "import typing\ndef softmax(x, dim=-1):\n"
                             "    def f(a: 'x.exp()'):\n        pass\n"
                             "    return typing.get_type_hints(f, locals())['a']\n",
    "help": "def softmax(x, dim=-1):\n    help('torch')\n    return x\n",
    "open /proc/self/mem": "def softmax(x, dim=-1):\n    open('/proc/self/mem', 'rb')\n    return x\n",
    "os.system": "import os\ndef softmax(x, dim=-1):\n    os.system('true')\n    return x\n",
    "os.environ's neighbour": "import os\ndef softmax(x, dim=-1):\n    return os.listdir('.')\n",
    "torch.serialization.pickle": "import torch\ndef softmax(x, dim=-1):\n"
                                  "    return torch.serialization.pickle.loads(b'')\n",
    "torch.importlib": "import torch\ndef softmax(x, dim=-1):\n"
                       "    return torch.importlib.import_module('pydoc').locate('torch.exp')(x)\n",
    "from torch import inspect": "from torch import inspect as ins\ndef softmax(x, dim=-1):\n"
                                 "    return ins.currentframe()\n",
    "torch.nn.functional.importlib": "import torch.nn.functional as F\ndef softmax(x, dim=-1):\n"
                                     "    return F.importlib.import_module('pydoc')\n",
    "triton.language.math.core.builtins": "import triton.language as tl\ndef softmax(x, dim=-1):\n"
                                           "    tl.math.core.builtins.exec('y = x.exp()')\n    return x\n",
    "tl rebound to core": "import triton.language as tl\ntl = tl.math.core\ndef softmax(x, dim=-1):\n"
                          "    tl.builtins.exec('y = 1')\n    return x\n",
    "tl.extra.pkgutil": "import triton.language as tl\ndef softmax(x, dim=-1):\n"
                        "    return tl.extra.pkgutil.resolve_name('torch:exp')(x)\n",
    "triton.knobs": "import triton\ndef softmax(x, dim=-1):\n    return triton.knobs\n",
    "triton.compile": "import triton\ndef softmax(x, dim=-1):\n    return triton.compile('k.ttir')\n",
    "torch.utils.benchmark": "import torch.utils.benchmark as b\ndef softmax(x, dim=-1):\n"
                             "    return b.Timer('t(x)', globals={'x': x}).timeit(1)\n",
    "torch.utils.cpp_extension": "from torch.utils.cpp_extension import load_inline\ndef softmax(x, dim=-1):\n"
                                 "    return load_inline('m', '')\n",
    "torch.jit": "import torch\ndef softmax(x, dim=-1):\n    return torch.jit.script(lambda t: t)(x)\n",
    "torch.fx": "import torch\ndef softmax(x, dim=-1):\n    return torch.fx.symbolic_trace\n",
    "torch.load": "import torch\ndef softmax(x, dim=-1):\n    return torch.load('w.pt')\n",
    "module rebound at module level": "import torch\nS = torch.serialization\ndef softmax(x, dim=-1):\n"
                                      "    return S.pickle.loads(b'')\n",
    "module in a local": "import torch\ndef softmax(x, dim=-1):\n    m = torch\n"
                         "    return m.serialization.pickle.loads(b'')\n",
    "module through a list": "import torch\nMODS = [torch]\ndef softmax(x, dim=-1):\n"
                             "    return MODS[0].importlib.import_module('pydoc')\n",
    "module as an argument": "import torch\ndef use(m, x):\n    return m\ndef softmax(x, dim=-1):\n"
                             "    return use(torch, x)\n",
    "getattr literal to a module": "import torch\ndef softmax(x, dim=-1):\n"
                                   "    return getattr(torch.serialization, 'pickle').loads(b'')\n",
    "getattr literal on a local": "import torch\ndef softmax(x, dim=-1):\n    m = [torch][0]\n"
                                  "    return getattr(m, 'importlib')\n",
    "attrgetter literal to a module": "import operator, torch\ndef softmax(x, dim=-1):\n"
                                      "    return operator.attrgetter('serialization.pickle')(torch).loads(b'')\n",
    "store into torch": "import torch\ndef softmax(x, dim=-1):\n    torch.exp = torch.sigmoid\n    return x\n",
    "setattr literal into torch": "import torch\ndef softmax(x, dim=-1):\n"
                                  "    setattr(torch, 'exp', None)\n    return x\n",
    "star import of timeit": "from timeit import *\ndef softmax(x, dim=-1):\n"
                             "    return timeit('t(x)', number=1, globals={'x': x})\n",
    "star import of torch.serialization": "from torch.serialization import *\ndef softmax(x, dim=-1):\n"
                                           "    return load('w.pt')\n",
    "an annotation that calls, read back": "import pydoc\ndef softmax(x, dim=-1):\n"
                                           "    def g(a: pydoc.locate('torch.exp')):\n        pass\n"
                                           "    return g.__annotations__['a'](x)\n",
    "a string annotation singledispatch evaluates": "import functools\n@functools.singledispatch\n"
                                                    "def h(a):\n    return a\n"
                                                    "def softmax(x, dim=-1):\n    @h.register\n"
                                                    "    def _(a: '__import__(\"pydoc\")'):\n        pass\n"
                                                    "    return x\n",
    "getattr of a literal __dict__": "import torch\ndef softmax(x, dim=-1):\n"
                                     "    return getattr(torch, '__dict__')['ex' + 'p'](x)\n",
    "a private name of an allowed module": "import typing\ndef softmax(x, dim=-1):\n"
                                           "    return typing._eval_type(x, {}, {})\n",
    "einops (a library the check cannot read)": "import einops\ndef softmax(x, dim=-1):\n"
                                                "    return einops.rearrange(x, 'a b -> b a')\n",
}


@pytest.mark.parametrize("form", sorted(ALLOW_LIST_EVASIONS))
def test_every_route_outside_the_allow_list_is_an_evasion_naming_its_line(form):
    source = ALLOW_LIST_EVASIONS[form]
    findings, problems = check_sources(FULL, {"a.py": source})
    assert not problems
    assert {(f.task, f.group) for f in findings} >= {("soft", "evasion")}
    assert {f.task for f in findings} == {"soft"}
    lines = source.splitlines()
    for f in findings:  # the finding names the line that reaches outside, and quotes it
        assert f.line >= 1 and f.code.split(" — ")[0].split(":")[-1].strip()[:8] in lines[f.line - 1], (f, lines)


def test_the_sparse_softmax_counts_as_softmax_by_what_it_resolves_to():
    """torch.sparse.softmax is torch._C._sparse._sparse_softmax; and the run-time table holds its operations."""
    from grader.intake.resolution import resolve_outside
    from grader.sandbox.forbidden import OPERATIONS

    assert ("softmax", "") in resolve_outside("torch.sparse.softmax")
    assert ("softmax", "") in resolve_outside("torch.sparse.log_softmax")
    assert found("import torch\nsp = torch.sparse\ndef softmax(x, dim=-1):\n    return sp.softmax(x, dim)\n") >= {
        ("soft", "softmax")}
    assert {"_sparse_softmax", "_sparse_log_softmax", "_sparse_softmax_backward_data",
            "_sparse_log_softmax_backward_data", "_masked_softmax_backward"} <= OPERATIONS["softmax"]


@pytest.mark.parametrize("source", [
    "import math\nimport typing\nfrom dataclasses import dataclass\nimport functools, itertools, collections\n"
    "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nfrom typing import Optional\n"
    "@dataclass\nclass Cfg:\n    n: int = 2\n"
    "@functools.lru_cache(maxsize=None)\ndef scale(d: int) -> float:\n    return 1 / math.sqrt(d)\n"
    "def softmax(x: torch.Tensor, dim: int = -1, out: Optional[torch.Tensor] = None) -> torch.Tensor:\n"
    "    e = torch.exp(x - x.amax(dim, keepdim=True))\n    s = collections.OrderedDict(a=1)\n"
    "    t = list(itertools.chain([1], [2]))\n    f = F.relu(e) * 0 + e\n"
    "    with torch.no_grad():\n        pass\n"
    "    assert isinstance(x, torch.Tensor) and x.dtype in (torch.float32, torch.float64)\n"
    "    return f / f.sum(dim, keepdim=True) * scale(4) * 2 + 0 * len(s) * len(t)\n",
    "import os\nimport types\nimport copy\nimport torch\n"
    "BLOCK = 64 if os.environ.get('TRITON_INTERPRET') == '1' else 128\n"
    "def softmax(x, dim=-1):\n    cfg = copy.copy(types.SimpleNamespace(n=BLOCK))\n    torch.manual_seed(0)\n"
    "    x = x.to(torch.float32).contiguous()\n    e = (x - x.max(dim=dim, keepdim=True).values).exp()\n"
    "    return e / e.sum(dim, keepdim=True) + 0 * cfg.n\n",
    "import torch\nimport triton\nimport triton.language as tl\nfrom math import *\n"
    "def softmax(x, dim=-1):\n    n = triton.next_power_of_2(x.shape[-1]) + triton.cdiv(4, 2) + floor(sqrt(4))\n"
    "    torch.backends.cuda.matmul.allow_tf32 = False\n    y = torch.empty_like(x, dtype=torch.float32)\n"
    "    return torch.exp(x) / torch.exp(x).sum(dim, keepdim=True) + 0 * n + 0 * y.sum()\n",
])
def test_real_code_on_the_allow_list_has_no_finding(source):
    assert found(source) == set()


def test_the_route_attributes_table_covers_every_module_torch_and_triton_hold():
    """Walks the real modules: every public attribute of an allowed torch or Triton module that holds a
    module turning a string into an object or code is refused on objects the check cannot follow."""
    from grader.intake.resolution import ROUTE_ATTRIBUTES, route_holders

    holders = route_holders()
    assert {"builtins", "importlib", "pickle", "serialization", "jit"} <= set(holders)
    assert set(holders) <= ROUTE_ATTRIBUTES, sorted(set(holders) - ROUTE_ATTRIBUTES)


def test_the_allow_list_is_stated_in_every_handout_with_a_forbidden_list():
    from grader.sandbox.forbidden import ALLOWED_PACKAGES

    for assignment in REAL:
        text = (ROOT / "assignments" / assignment / "README.md").read_text(encoding="utf-8")
        assert "## Modules you may use" in text, assignment
        section = text[text.index("## Modules you may use"):]
        for name in ("math", "typing", "dataclasses", "functools", "itertools", "collections", "torch.nn"):
            assert name in ALLOWED_PACKAGES and f"`{name}`" in section, (assignment, name)
    from grader.sandbox.forbidden import allow_list_text

    written = allow_list_text()  # what `grade new` writes into a new handout
    assert all(f"`{name}`" in written for name in ALLOWED_PACKAGES) and "`os.environ`" in written

"""Forbidden APIs, statically: which names reveal each group, and what counts as evasion.

Groups a manifest may forbid (`forbidden = [...]` in a task) are the API groups
below. Three more groups are added by the static check itself:

* ``evasion`` for every task with a forbidden list (or a requirement): code the
  grader cannot follow, listed in EVASION_RULES (torch internals, names or code
  built at run time, introspection, other programs, libraries it cannot read);
* ``course_code`` for every task: importing the grader or the course's own code;
* ``no_triton_launch`` for a task with ``requires = ["triton_launch"]`` whose
  functions never launch a @triton.jit kernel of the submission;
* ``kernel_code`` for a task whose kernels (those it launches, or the kernel
  contract's it is graded on) hold Python that Triton does not compile: in the
  CPU interpreter a kernel body runs as Python, so it could compute anything.

This is the one table of forbidden APIs: the static check reads all of it, and
the sandbox worker's run-time recorder (grader.sandbox.facts) reads ATTRIBUTES
(the `__name__` of every torch function and Tensor method a call reaches) and
OPERATIONS (every ATen operation it reaches at torch's dispatcher, below every
Python route: aliases, Tensor methods, torch.distributions, gumbel_softmax,
torch.ops all end in the same operation). Standard library only: this module is
part of the worker's runtime copy.
"""

from __future__ import annotations

from dataclasses import dataclass

EVASION = "evasion"
COURSE_CODE = "course_code"
NO_TRITON_LAUNCH = "no_triton_launch"
KERNEL_CODE = "kernel_code"

GROUP_NAMES: dict[str, str] = {
    "softmax": "torch's softmax family (softmax, log_softmax, softmin, nn.Softmax)",
    "sdpa": "torch.nn.functional.scaled_dot_product_attention",
    "multihead_attention": "torch.nn.MultiheadAttention",
    "matmul": "torch matrix products (matmul, @, bmm, mm, einsum) on the full problem",
    "numpy": "another array library instead of torch (numpy, scipy, jax, cupy, tensorflow, mlx)",
    EVASION: ("code the grader cannot check (a module outside the handout's list, such as torch internals "
              "like torch._C or torch.ops, or pydoc, timeit and importlib; names or code built at run time "
              "with vars, globals, getattr, eval or exec; introspection of frames, modules or the garbage "
              "collector; other threads or other programs)"),
    COURSE_CODE: "the grader's or the course's own code (grader, reference, course_kernels)",
    NO_TRITON_LAUNCH: "no launch of a @triton.jit kernel of your own",
    KERNEL_CODE: "code inside a @triton.jit kernel that Triton does not compile",
}

# Groups a manifest may list in a task's `forbidden`.
API_GROUPS: tuple[str, ...] = ("softmax", "sdpa", "multihead_attention", "matmul", "numpy")

# Values a manifest may list in a task's `requires`.
REQUIREMENTS: tuple[str, ...] = ("triton_launch",)

# Fully qualified names (after resolving import aliases).
DOTTED: dict[str, frozenset[str]] = {
    "softmax": frozenset({
        "torch.softmax", "torch.log_softmax", "torch._softmax", "torch._log_softmax",
        "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
        "torch.nn.functional.softmin", "torch.special.softmax", "torch.special.log_softmax",
        "torch.nn.Softmax", "torch.nn.LogSoftmax", "torch.nn.Softmin", "torch.nn.Softmax2d",
        "torch.nn.functional.gumbel_softmax",
        "torch._C._nn.softmax", "torch._C._VariableFunctions.softmax",
    }),
    "sdpa": frozenset({
        "torch.nn.functional.scaled_dot_product_attention",
        "torch._C._nn.scaled_dot_product_attention",
        "torch.nn.attention.sdpa_kernel",
        "torch.nn.attention.flex_attention.flex_attention",
    }),
    "multihead_attention": frozenset({
        "torch.nn.MultiheadAttention", "torch.nn.modules.activation.MultiheadAttention",
        "torch.nn.functional.multi_head_attention_forward",
    }),
    "matmul": frozenset({
        "torch.matmul", "torch.bmm", "torch.mm", "torch.einsum", "torch.baddbmm", "torch.addmm",
        "torch.tensordot", "torch.nn.functional.linear", "torch.inner", "torch.mv",
        "torch.linalg.matmul", "torch.linalg.multi_dot", "torch.chain_matmul",
    }),
    "numpy": frozenset({"torch.from_numpy", "torch.Tensor.numpy"}),
}

# Attribute names that give a group away whatever object they are read from
# (x.softmax(...), F.softmax, getattr(F, "softmax"), vars(torch)["softmax"]); at run time,
# the names of the torch functions and Tensor methods that reveal the group.
ATTRIBUTES: dict[str, frozenset[str]] = {
    "softmax": frozenset({"softmax", "log_softmax", "softmin", "_softmax", "_log_softmax",
                          "_safe_softmax", "gumbel_softmax", "Softmax", "LogSoftmax", "Softmin", "Softmax2d",
                          "_sparse_softmax", "_sparse_log_softmax", "_masked_softmax"}),
    "sdpa": frozenset({"scaled_dot_product_attention", "_scaled_dot_product_attention_math",
                       "_scaled_dot_product_flash_attention",
                       "_scaled_dot_product_efficient_attention",
                       "_scaled_dot_product_cudnn_attention", "_fused_sdp_choice",
                       "flex_attention"}),
    "multihead_attention": frozenset({"MultiheadAttention", "multi_head_attention_forward",
                                      "_native_multi_head_attention", "TransformerEncoderLayer",
                                      "TransformerDecoderLayer", "TransformerEncoder",
                                      "TransformerDecoder", "Transformer"}),
    "matmul": frozenset({"matmul", "bmm", "mm", "einsum", "baddbmm", "addmm", "addbmm", "addmv",
                         "tensordot", "__matmul__", "__rmatmul__", "dot", "vdot", "inner", "mv",
                         "chain_matmul", "multi_dot", "linear", "bilinear"}),
    "numpy": frozenset({"numpy", "from_numpy", "__array__", "__array_interface__"}),
}

# At run time: the ATen operations (overload packets, as torch's dispatcher names them) that
# compute a group. Composite operations (softmax, scaled_dot_product_attention, matmul, linear,
# einsum) reach the dispatcher as these; SDPA's math path (dropout, say) reaches _safe_softmax and
# bmm, and its name is still seen through ATTRIBUTES.
OPERATIONS: dict[str, frozenset[str]] = {
    "softmax": frozenset({"_softmax", "_log_softmax", "_safe_softmax", "_masked_softmax",
                          "_softmax_backward_data", "_log_softmax_backward_data", "_masked_softmax_backward",
                          "_sparse_softmax", "_sparse_log_softmax", "_sparse_softmax_backward_data",
                          "_sparse_log_softmax_backward_data", "_nested_tensor_softmax_with_shape"}),
    "sdpa": frozenset({"_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                       "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                       "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_attention_math",
                       "_scaled_dot_product_attention_math_for_mps", "_flash_attention_forward",
                       "_efficient_attention_forward", "_fused_sdp_choice"}),
    "multihead_attention": frozenset({"_native_multi_head_attention", "_transformer_encoder_layer_fwd"}),
    "matmul": frozenset({"mm", "bmm", "addmm", "addbmm", "baddbmm", "addmv", "mv", "dot", "vdot", "matmul",
                         "_addmm_activation", "_int_mm", "_trilinear", "linear", "_cdist_forward"}),
}

# Top-level modules of the "numpy" group: array libraries that are not torch.
NUMPY_MODULES: frozenset[str] = frozenset({
    "numpy", "scipy", "jax", "jaxlib", "cupy", "cupyx", "tensorflow", "mlx", "numba",
})

# Top-level modules of the course itself: never importable by a submission.
COURSE_MODULES: frozenset[str] = frozenset({"grader", "reference", "course_kernels"})

# The allow-list: the modules a submission may reach in a task with a forbidden list (by an
# import, or as an attribute of another module: `torch.serialization.pickle` is pickle). A module
# is allowed when it is listed in ALLOWED_EXACT, or it or a package above it is in
# ALLOWED_PACKAGES, and no part of its name after the first starts with "_" and it is not in
# or under DENIED_MODULES. Everything else (the rest of the standard library, other
# libraries, the rest of torch and Triton) is evasion where it is used: the grader cannot see
# what it runs, and most of it turns a string into an object or into running code (pydoc,
# timeit, runpy, importlib, pickle, torch.jit, torch.utils.cpp_extension...). Each handout
# (assignments/<id>/README.md) states the list.
ALLOWED_EXACT: frozenset[str] = frozenset({"torch", "triton", "__future__"})
ALLOWED_PACKAGES: frozenset[str] = frozenset({
    # the standard library's plain helpers: numbers, containers, typing, small utilities
    "math", "cmath", "numbers", "typing", "typing_extensions", "dataclasses", "functools", "itertools",
    "collections", "enum", "abc", "copy", "operator", "types", "warnings", "contextlib", "random", "time",
    # torch's public math surface
    "torch.nn", "torch.autograd", "torch.linalg", "torch.fft", "torch.special", "torch.random",
    "torch.types", "torch.functional", "torch.amp", "torch.cuda", "torch.backends",
    "torch.testing", "torch.distributions", "torch.masked", "torch.nested", "torch.sparse", "torch.cpu",
    "torch.version", "torch.torch_version", "torch.accelerator", "torch.func",
    # Triton's language (kernels themselves are vetted by grader.intake.kernels)
    "triton.language",
})
DENIED_MODULES: frozenset[str] = frozenset({
    "torch.nn.parallel",  # runs modules on other threads
    "torch.cuda.jiterator",  # compiles CUDA source given as a string
})
# Where torch's and Triton's allowed modules keep some of the classes and functions they
# re-export (triton.jit is triton.runtime.jit.jit): reachable as those objects, not as modules.
OBJECT_HOMES: frozenset[str] = frozenset({
    "triton.runtime.jit", "triton.runtime.autotuner", "triton.runtime.errors", "triton.errors",
    "triton.compiler.errors",
    "triton.runtime.interpreter",  # under TRITON_INTERPRET=1, tl.zeros and its kin are the interpreter's
})
# Names in modules outside the allow-list that a submission may still read: the environment
# (a kernel file may pick its tile sizes by TRITON_INTERPRET), and what is under them.
ALLOWED_NAMES: frozenset[str] = frozenset({"os.environ", "os.getenv"})
# Libraries whose top-level name an import may name (besides the standard library and the
# submission's own files); whether a use of them is allowed is the allow-list's to say.
ALLOWED_LIBRARIES: frozenset[str] = frozenset({"torch", "triton", "typing_extensions"})


def allow_list_text() -> str:
    """The allow-list in one sentence of Markdown, for a handout written by `grade new`."""
    modules = sorted(ALLOWED_EXACT | ALLOWED_PACKAGES, key=lambda m: (m.split(".")[0] not in ("torch", "triton"), m))
    return ("In a task with things it may not use, your code may reach only these modules (imported, or as an "
            "attribute of another module) and your own files: " + ", ".join(f"`{m}`" for m in modules)
            + ", and " + " / ".join(f"`{n}`" for n in sorted(ALLOWED_NAMES)) + " to read a setting. Names are "
            "written, not computed (no `getattr` of a computed name, `eval`, `exec`, `vars`, `__import__`, ...).")


def module_allowed(name: str) -> bool:
    """Whether a submission in a task with a forbidden list may reach the module `name` (dotted)."""
    parts = name.split(".")
    if any(p.startswith("_") for p in parts[1:]) or (parts[0].startswith("_") and name not in ALLOWED_EXACT):
        return False
    if any(name == d or name.startswith(d + ".") for d in DENIED_MODULES):
        return False
    return name in ALLOWED_EXACT or any(name == a or name.startswith(a + ".") for a in ALLOWED_PACKAGES)


@dataclass(frozen=True)
class EvasionRule:
    """One row of the evasion table.

    kind:
      ``prefix``     a dotted name (after resolving aliases), or an import, at or under one of `names`
      ``builtin``    a built-in function, by its bare name (not shadowed by the student's own name)
      ``name_arg``   a call that takes an attribute name (getattr, attrgetter...): evasion unless
                     the name is a string literal, which is then checked against the API groups
      ``attribute``  an attribute read from any object
      ``private``    a component starting with ``_`` under one of `names` (torch._C, torch._ops...)
    """

    kind: str
    names: frozenset[str]
    why: str


EVASION_RULES: tuple[EvasionRule, ...] = (
    EvasionRule("prefix", frozenset({
        "torch.ops", "torch.library", "torch.overrides", "torch.compile", "torch.compiler",
        "torch.jit", "torch.fx", "torch.export", "torch.package", "torch.hub",
        "torch.utils.cpp_extension", "torch.utils._python_dispatch", "torch.load",
    }), "torch machinery below or beside its public functions"),
    EvasionRule("private", frozenset({"torch"}), "torch internals (names starting with _)"),
    EvasionRule("builtin", frozenset({"vars", "globals", "locals"}), "a namespace dictionary"),
    EvasionRule("builtin", frozenset({"eval", "exec", "compile", "__import__", "breakpoint", "help"}),
                "code or imports built at run time"),
    EvasionRule("builtin", frozenset({"open"}), "a file (such as the process's own memory)"),
    EvasionRule("name_arg", frozenset({"getattr", "setattr", "delattr", "hasattr",
                                       "operator.attrgetter", "operator.methodcaller"}),
                "an attribute name computed at run time"),
    EvasionRule("prefix", frozenset({
        "importlib", "imp", "pkgutil", "zipimport", "runpy", "builtins", "code", "codeop", "pydoc",
        "timeit", "pdb", "bdb", "doctest", "trace", "profile", "cProfile", "typing.get_type_hints",
        "typing.ForwardRef", "typing_extensions.get_type_hints", "typing_extensions.get_annotations",
        "typing_extensions.ForwardRef", "typing_extensions.evaluate_forward_ref",
        "torch.utils.benchmark", "torch.cuda.jiterator", "triton.compile", "triton.compiler",
        "triton.runtime.driver", "triton.knobs", "triton.tools",
    }), "imports, objects or code built from a string at run time"),
    EvasionRule("prefix", frozenset({
        "sys.modules", "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
        "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache", "threading.settrace",
        "threading.setprofile", "gc", "inspect", "ctypes", "cffi", "types.FunctionType",
        "types.CodeType", "types.ModuleType", "types.MethodType", "types.LambdaType",
    }), "introspection of modules, frames or live objects"),
    EvasionRule("prefix", frozenset({
        "marshal", "pickle", "_pickle", "dill", "cloudpickle", "copyreg", "shelve",
    }), "code loaded from serialised data"),
    EvasionRule("prefix", frozenset({
        "threading", "_thread", "concurrent", "asyncio",
    }), "another thread, where the grader cannot follow the call"),
    EvasionRule("prefix", frozenset({
        "subprocess", "multiprocessing", "pty", "os.system", "os.popen", "os.fork", "os.forkpty",
        "os.posix_spawn", "os.posix_spawnp", "os.execl", "os.execle", "os.execlp", "os.execlpe",
        "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.spawnl", "os.spawnle",
        "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe",
    }), "another program or process"),
    EvasionRule("attribute", frozenset({
        "__dict__", "__globals__", "__code__", "__closure__", "__builtins__", "__subclasses__",
        "__bases__", "__base__", "__mro__", "mro", "__getattribute__", "__getattr__", "__self__",
        "__func__", "__wrapped__", "__loader__", "__spec__", "__traceback__", "__reduce__",
        "__reduce_ex__", "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace",
        "tb_frame", "tb_next", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code",
        "co_code", "co_consts", "co_names", "__annotations__",
    }), "introspection of frames, code objects, namespaces or classes"),
)

# `x.__class__.<dunder>` is a class chain; these two dunders only give a name.
CLASS_CHAIN_HARMLESS: frozenset[str] = frozenset({"__name__", "__qualname__"})


def finding_reason(groups: list[str], functions: tuple[str, ...] = (), section: str = "",
                   through: tuple[str, ...] = ()) -> str:
    """Why a task earns 0, for the report ("This task earns 0: <reason>.").

    `groups` are the groups of the task's static findings; `functions` the task's
    functions (named in the Triton launch message) and `section` its lecture sections;
    `through` the student's own functions, other than the task's, whose code holds a
    forbidden call the task's functions reach (named, so the student knows where to fix it)."""
    parts = []
    api = [GROUP_NAMES.get(g, g) for g in groups if g not in (EVASION, COURSE_CODE, NO_TRITON_LAUNCH, KERNEL_CODE)]
    if api:
        where = ""
        if through:
            named = " and ".join(f"your {name}" for name in through)
            where = f" (it comes through {named}, which this task's function calls: remove the call there)"
        parts.append("uses " + ", ".join(api) + where + "; this task asks you to write that part yourself")
    if EVASION in groups:
        parts.append("reaches " + GROUP_NAMES[EVASION] + ": call torch's public functions by their "
                     "names and keep to the modules the handout lists under \"Modules you may use\" "
                     "and your own files")
    if COURSE_CODE in groups:
        parts.append("imports " + GROUP_NAMES[COURSE_CODE] + ", which a submission may never do: "
                     "remove the import (rename your own module if it has one of these names)")
    if NO_TRITON_LAUNCH in groups:
        where = " or ".join(functions) if functions else "this task's function"
        cite = f" ({section})" if section else ""
        parts.append(f"{where} never launches a @triton.jit kernel of your own: write the kernel with "
                     f"@triton.jit and launch it as kernel[grid](...) from {where} (directly, through a "
                     f"helper, or in a torch.autograd.Function's forward/backward){cite}")
    if KERNEL_CODE in groups:
        cite = f" ({section})" if section else ""
        parts.append("a kernel it runs holds code Triton does not compile: inside @triton.jit use only tl.* "
                     "operations, other @triton.jit functions of your file, module-level constants, your "
                     f"kernel's arguments and Triton's builtins (range, min, max, ...){cite}")
    return "; ".join(parts)

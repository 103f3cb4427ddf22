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
    EVASION: ("code the grader cannot check (torch internals such as torch._C or torch.ops, names "
              "or code built at run time with vars, globals, getattr, eval, exec or importlib, "
              "introspection of frames, modules or the garbage collector, other threads, other programs "
              "or libraries other than torch and triton)"),
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
                          "_safe_softmax", "gumbel_softmax", "Softmax", "LogSoftmax", "Softmin", "Softmax2d"}),
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
                          "_softmax_backward_data", "_log_softmax_backward_data"}),
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

# Libraries (besides the standard library and the submission's own files) whose use the
# static check can vouch for. Anything else is evasion in a task with a forbidden list:
# the grader cannot see what it calls.
ALLOWED_LIBRARIES: frozenset[str] = frozenset({"torch", "triton", "typing_extensions"})


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
    EvasionRule("builtin", frozenset({"eval", "exec", "compile", "__import__", "breakpoint"}),
                "code or imports built at run time"),
    EvasionRule("name_arg", frozenset({"getattr", "setattr", "delattr", "hasattr",
                                       "operator.attrgetter", "operator.methodcaller"}),
                "an attribute name computed at run time"),
    EvasionRule("prefix", frozenset({
        "importlib", "imp", "pkgutil", "zipimport", "runpy", "builtins", "code", "codeop",
    }), "imports or code built at run time"),
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
        "co_code", "co_consts", "co_names",
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
                     "names and keep to torch, triton, math and your own files")
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

"""Exceptions of the Triton toolchain a student cannot act on as written, explained.

An API that Triton 3.9 removed, or that its CPU interpreter cannot run, is recognised by
the exception it raises (`explain_exception`) and explained as what to write instead;
`BF16_HINT` is for source the interpreter runs without an error but computes wrongly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from grader.harness.catalogue import Diagnosis

TRITON_HANDOUT = "the handout's section “Testing on a machine without a GPU” (README.md)"


@dataclass(frozen=True)
class ApiProblem:
    """A Triton API that Triton 3.9 removed or that its CPU interpreter cannot run, recognised by
    the exception it raises (`types`: exception class names, `pattern`: searched in the message)."""

    id: str
    title: str
    explanation: str
    types: frozenset[str]
    pattern: re.Pattern
    section: str = "§24"
    handout: str = TRITON_HANDOUT

    def diagnosis(self) -> Diagnosis:
        return Diagnosis(self.id, self.title, self.section, self.explanation, source="api",
                         matched="exception", handout=self.handout)


# The interpreter wraps what a kernel raises in an InterpreterError whose message is the inner
# exception's repr; a GPU compile wraps it in a CompilationError. Both are searched by message.
_TRITON_WRAPPERS = frozenset({"InterpreterError", "CompilationError", "TritonError"})

API_PROBLEMS: tuple[ApiProblem, ...] = (
    ApiProblem(
        "triton_block_ptr_removed", "tl.make_block_ptr no longer exists: Triton 3.9 removed block pointers",
        "Block pointers (tl.make_block_ptr, tl.advance, boundary_check=) are gone from Triton 3.9, so the "
        "kernel stops at that line, in the interpreter and on a GPU alike. Address each tile yourself: "
        "offs_m = start_m + tl.arange(0, BLOCK_M) and offs_d = tl.arange(0, HEAD_DIM) give the tile's "
        "pointers Q + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd; load them with "
        "mask=offs_m[:, None] < N and other=0.0 (the mask does what boundary_check did). For the keys, "
        "build the pointers from start_n at each step of the loop instead of calling tl.advance. The "
        "stub's query tile shows the pattern.",
        _TRITON_WRAPPERS | {"NotImplementedError", "AttributeError"},
        re.compile(r"Block pointers have been removed|'triton\.language' has no attribute 'make_block_ptr'")),
    ApiProblem(
        "triton_advance_removed", "tl.advance no longer exists: Triton 3.9 removed block pointers",
        "tl.advance moved a block pointer, and block pointers are gone from Triton 3.9. Keep plain "
        "pointer tensors and move them yourself: k_ptrs + start_n * stride_kn (or rebuild them from "
        "start_n + tl.arange(0, BLOCK_N) at each step), with a mask for the keys past N.",
        _TRITON_WRAPPERS | {"AttributeError"}, re.compile(r"'triton\.language' has no attribute 'advance'")),
    ApiProblem(
        "triton_boundary_check", "boundary_check= on a plain pointer (a block-pointer argument)",
        "boundary_check and padding_option belong to block pointers, which Triton 3.9 removed. With "
        "pointer arithmetic the mask does that job: tl.load(ptrs, mask=offs_n[:, None] < N, other=0.0).",
        _TRITON_WRAPPERS | {"TypeError"}, re.compile(r"unexpected keyword argument '(boundary_check|padding_option)'")),
    ApiProblem(
        "triton_autotune_without_gpu", "@triton.autotune with several configs needs a GPU",
        "Autotuning times every config on a GPU, so with more than one config it cannot run in the "
        "interpreter (there is no driver to time on). Use fixed block sizes, or a single config when "
        "os.environ.get('TRITON_INTERPRET') == '1', and keep the full list for the GPU.",
        frozenset({"RuntimeError"}) | _TRITON_WRAPPERS, re.compile(r"\d+ active drivers")),
    ApiProblem(
        "triton_arange_not_power_of_two", "tl.arange with a length that is not a power of two",
        "Every tile dimension in Triton is a power of two: tl.arange(0, 48) is refused. Round the block up "
        "(triton.next_power_of_2) and mask the entries past the real size, the way the tail of N is masked.",
        _TRITON_WRAPPERS | {"ValueError"}, re.compile(r"arange's range must be a power of 2")),
    ApiProblem(
        "triton_libdevice_moved", "tl.libdevice no longer exists",
        "tl.libdevice moved to tl.extra.cuda.libdevice, which only compiles for a GPU and does not run in "
        "the interpreter. The exponentials and logarithms this kernel needs are tl.exp, tl.exp2, tl.log "
        "and tl.log2 (tl.math has the rest).",
        _TRITON_WRAPPERS | {"AttributeError"}, re.compile(r"'triton\.language' has no attribute 'libdevice'")),
    ApiProblem(
        "triton_gpu_only_function", "a GPU-only function (libdevice or inline assembly) in the interpreter",
        "tl.extra.cuda.libdevice functions and tl.inline_asm_elementwise are compiled for the GPU and "
        "cannot run in Triton's CPU interpreter. Use tl.exp, tl.exp2, tl.log, tl.log2 and tl.math, "
        "which run in both. (The same error also means a tl function was called from a helper without "
        "@triton.jit: decorate the helper.)",
        _TRITON_WRAPPERS | {"ValueError", "NotImplementedError"},
        re.compile(r"_semantic` argument must be provided outside of JIT|not supported in interpreter mode")),
)

# Source text that the interpreter runs without an error but computes wrongly (Triton 3.9).
BF16_IN_KERNEL = re.compile(r"\btl\.bfloat16\b")
BF16_HINT = Diagnosis(
    "triton_bf16_interpreter", "tl.bfloat16 in the kernel: Triton's interpreter computes it wrongly",
    "§24", "Triton's CPU interpreter gets bfloat16 arithmetic wrong without saying so (a bfloat16 "
    "tl.dot there can be off by orders of magnitude), and your file converts to tl.bfloat16. Keep the "
    "running statistics and the accumulator in float32 and convert p to v's dtype (p.to(v.dtype)) "
    "before the second tl.dot; bfloat16 inputs are only tested on a GPU.",
    source="api", handout=TRITON_HANDOUT)

IEEE_PRECISION = re.compile(r"""input_precision\s*=\s*['"]ieee['"]|allow_tf32\s*=\s*False""")
TF32_RELATIVE = (2.0 ** -16, 2.0 ** -6)  # a float32 result's worst error / its largest value, if TF32 explains it
TF32_HINT = Diagnosis(
    "triton_tf32_products", "tl.dot without input_precision=\"ieee\": TF32 products on the GPU",
    "§24", "On a GPU, tl.dot of float32 tiles multiplies in TF32 (10 bits of mantissa, errors about 1e-4 "
    "of the values) unless told otherwise, and your kernel has a tl.dot without input_precision=\"ieee\", "
    "so its float32 results miss float32's tolerance by about TF32's rounding. Triton's interpreter "
    "multiplies in full float32, which is why this shows only on a GPU. Pass input_precision=\"ieee\" to "
    "every tl.dot (the stub's steps do).", source="api", handout=TRITON_HANDOUT)


def dots_without_ieee(source: str) -> int:
    """How many `tl.dot(...)` calls of `source` do not ask for IEEE float32 products (balanced
    parentheses, so nested calls such as tl.trans(k) are read whole)."""
    count = 0
    start = source.find("tl.dot(")
    while start != -1:
        depth, index = 0, start + len("tl.dot")
        while index < len(source):
            depth += {"(": 1, ")": -1}.get(source[index], 0)
            index += 1
            if depth == 0:
                break
        if not IEEE_PRECISION.search(source[start:index]):
            count += 1
        start = source.find("tl.dot(", index)
    return count


def tf32_sized(actual, expected) -> bool:
    """Whether a float32 result's errors are TF32's size: worst error over the largest value within
    TF32_RELATIVE (far above float32's rounding, far below a logic mistake)."""
    import torch

    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)) or \
            expected.dtype != torch.float32 or actual.shape != expected.shape:
        return False
    a, e = actual.detach().double().cpu(), expected.detach().double().cpu()
    if not bool(torch.isfinite(a).all()):
        return False
    scale = float(e.abs().max()) or 1.0
    worst = float((a - e).abs().max()) / scale
    return TF32_RELATIVE[0] <= worst <= TF32_RELATIVE[1]


CONTRACT_HANDOUT = "the handout's section “Rules” (README.md): each kernel the grader launches is @triton.jit alone"


def contract_decorator_hint(kernel: str, decorators: list[str]) -> Diagnosis:
    """Why a contract kernel that carries another decorator (@triton.autotune, @triton.heuristics) fails,
    whatever exception the launch raised: the rule itself, named in the test's own message."""
    shown = ", ".join("@" + d.split("(", 1)[0] for d in decorators)
    return Diagnosis(
        "contract_kernel_not_jit_alone", f"{kernel} is decorated with {shown}: a contract kernel is @triton.jit alone",
        "§24", "The grader launches your kernels itself, with the contract's arguments and tile sizes (contract.py), "
        "so each kernel the contract names must be decorated with @triton.jit and nothing else: @triton.autotune "
        "and @triton.heuristics choose the launch's arguments themselves, and the launch fails or runs other tile "
        "sizes than the contract's. Remove the decorator and keep BLOCK_M and BLOCK_N as the constexpr arguments "
        "the contract passes.", source="api", handout=CONTRACT_HANDOUT)


# A kernel run by the interpreter that ends the worker has almost always touched memory outside a
# tensor: the interpreter loads and stores through raw addresses, so an unmasked tile that runs past
# the last row or key reads or writes wherever that address lands.
KERNEL_CRASH_HINT = Diagnosis(
    "triton_kernel_out_of_bounds", "an unmasked load or store past the end of a tensor",
    "§24", "Under Triton's interpreter a kernel that ends the process has most often stored (or loaded) "
    "outside a tensor. The last tile of rows or keys runs past N when N is not a multiple of the block "
    "size: give every tl.load and tl.store whose rows or keys can run past N a mask (mask=offs < N, and "
    "other= for loads). The shapes it ended on are listed with each test; on a GPU the same mistake "
    "corrupts memory or faults.",
    source="crash", matched="crash", handout=TRITON_HANDOUT)


def explain_exception(raised: dict) -> Diagnosis | None:
    """The Triton API problem that the worker's exception summary `raised` ({"type",
    "message"}) shows, if it is one of API_PROBLEMS."""
    kind, message = str(raised.get("type", "")), str(raised.get("message", ""))
    for problem in API_PROBLEMS:
        if kind in problem.types and problem.pattern.search(message):
            return problem.diagnosis()
    return None

"""What hidden and public tests use: the `check` fixture's object.

A test asks for `check` and calls the student's functions through it:

    @pytest.mark.task("scaled_dot_product_attention")
    def test_cross_attention(check):
        q, k, v = check.randn(2, 3, 8), check.randn(2, 5, 8), check.randn(2, 5, 4)
        check.close("scaled_dot_product_attention", q, k, v, heatmap=1)

`check.close` calls the student (in the sandbox) and the reference (here, in
the trusted process), compares with dtype-aware tolerances and, when they
differ, runs the misconception catalogue and fails with a message that says
what is wrong, where, and which lecture section explains it.
"""

from __future__ import annotations

import ast
import math
import re
import zlib
from dataclasses import dataclass, field

import torch

from grader.core.manifest import Manifest
from grader.core.tolerances import tolerance_for
from grader.harness import degenerate, precision
from grader.harness.catalogue import Composition, Diagnosis, Mutant
from grader.harness.diagnose import diagnose, normalised_message
from grader.harness.differences import Difference, measure_difference, outputs_match
from grader.harness.triton_api import (
    BF16_HINT,
    BF16_IN_KERNEL,
    KERNEL_CRASH_HINT,
    TF32_HINT,
    contract_decorator_hint,
    dots_without_ieee,
    explain_exception,
    tf32_sized,
)
from grader.intake.kernels import scan_module
from grader.sandbox.client import CallResult
from grader.sandbox.facts import CallFacts

# One module because `check` is one object, the whole API a test sees (call, compare, close, holds,
# raises, expect, timing); what it judges with lives in modules of their own (differences, precision,
# degenerate, diagnose, triton_api).
HEATMAP_SIZE = 16  # largest window of a weight matrix shown in a report


def _argument_words(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    if isinstance(value, (bool, int, float, str)) or value is None:
        return repr(value)
    return type(value).__name__


def call_inputs(args: tuple, kwargs: dict) -> list[dict]:
    """A call's inputs as data, for the record of a call that ended the process: per argument its
    position or keyword, and its shape and dtype (a tensor) or its value (anything else)."""
    named = [(str(i + 1), v) for i, v in enumerate(args)] + [(str(k), v) for k, v in kwargs.items()]
    inputs = []
    for argument, value in named:
        if isinstance(value, torch.Tensor):
            inputs.append({"argument": argument, "shape": list(value.shape),
                           "dtype": str(value.dtype).removeprefix("torch."),
                           "contiguous": bool(value.is_contiguous())})
        else:
            inputs.append({"argument": argument, "value": _argument_words(value)})
    return inputs


def inputs_words(inputs: list[dict]) -> str:
    """`call_inputs` in words: "(1, 2, 17, 32) float32, (1, 2, 17, 32) float32, causal=False"."""
    words = []
    for item in inputs:
        if "shape" in item:
            text = f"{tuple(item['shape'])} {item['dtype']}" + ("" if item.get("contiguous", True) else " (strided)")
        else:
            text = str(item["value"])
        words.append(text if item["argument"].isdigit() else f"{item['argument']}={text}")
    return ", ".join(words) if words else "no arguments"


def raised_advice(name: str, kind: str, args: tuple, kwargs: dict, section: str) -> str:
    """What to do about an exception nothing in the catalogue explains: the inputs it was
    raised on (shapes and dtypes, which the contract says must work) and where to read."""
    shown = [_argument_words(a) for a in args] + [f"{k}={_argument_words(v)}" for k, v in kwargs.items()]
    inputs = ", ".join(shown) if shown else "no arguments"
    read = f" (lecture {section})" if section else ""
    if kind == "AssertionError":
        return (f"Your own assert stopped it on these inputs: {inputs}. The contract{read} says {name} "
                f"must handle them: make the code general instead of asserting they do not occur.")
    return (f"It was called with {inputs}, which the contract{read} says {name} must handle; the last "
            f"lines above show where your code stopped.")


FORM_KEYS = {"shape": "shape", "dtype": "dtype", "device": "device"}
# What torch's CPU allocator says when the memory limit refuses an allocation.
ALLOCATION = re.compile(r"you tried to allocate ([\d,]+) bytes")


def _only_form(actual, expected, rtol: float | None, atol: float | None) -> str | None:
    """Which of shape, dtype or device alone is wrong ("dtype", say) when `actual`, brought to the
    expected's form (cast, moved, or reshaped where it holds the same number of values in the same
    order), matches `expected` within the expected dtype's tolerance (or the test's); None when the
    values are wrong too. Tuples: the first item whose form differs decides."""
    if isinstance(expected, (tuple, list)) and isinstance(actual, (tuple, list)) and len(actual) == len(expected):
        pairs = list(zip(actual, expected, strict=True))
    else:
        pairs = [(actual, expected)]
    wrong: list[str] = []
    for a, e in pairs:
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)):
            return None
        if a.numel() != e.numel():
            return None
        parts = [p for p, differs in (("shape", a.shape != e.shape), ("dtype", a.dtype != e.dtype),
                                      ("device", a.device.type != e.device.type)) if differs]
        formed = a.detach().cpu().to(e.dtype).reshape(e.shape)
        if not outputs_match(formed, e.detach().cpu(), rtol, atol):
            return None
        wrong += [p for p in parts if p not in wrong]
    return " and ".join(wrong) if wrong else None


class _HelperFailed(Exception):
    """A student's helper did not return a value while a composition ran (it raised, hung...)."""


class StudentProblem(AssertionError):
    """The student's code did not produce a value: it raised, hung, crashed..."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # raised | not_implemented | missing | import_failed | timeout |
        #                   crashed | unsupported | budget | disk | forbidden | degenerate


class Pending(Exception):
    """This test cannot be judged here (e.g. timing without a GPU): neither pass nor fail."""


@dataclass
class GradingContext:
    """Everything a test needs that is the same for the whole run."""

    runner: object  # SandboxRunner or InProcessRunner
    manifest: Manifest | None
    reference: dict  # function name → trusted reference function
    mutants: list[Mutant] = field(default_factory=list)
    seed: int = 0
    device: str = "cpu"
    hidden: bool = False
    timing_device: str | None = None  # where kernels are timed: "cuda", "cpu" (demonstrations), or nowhere
    kernel_runner: object | None = None  # the worker of the student's kernels alone (a kernel contract)
    compositions: list[Composition] = field(default_factory=list)  # a task's function from other tasks' ones
    stub_sources: dict[str, str] = field(default_factory=dict)  # the handout's stub files (filename → text)
    zeroed_tasks: frozenset[str] = frozenset()  # tasks a static finding already gives no points: never timed

    def runner_for(self, name: str):
        """Who runs `name`: the kernel worker for a launcher of the kernel contract (grading by
        construction), else the student's worker."""
        if self.kernel_runner is not None and self.manifest is not None and self.manifest.is_launcher(name):
            return self.kernel_runner
        return self.runner


class _Namespace:
    def __init__(self, functions: dict):
        self._functions = functions

    def __getattr__(self, name: str):
        try:
            return self._functions[name]
        except KeyError:
            raise AttributeError(f"the reference has no function {name!r}") from None


class Check:
    """Per-test helper. `record` collects evidence the report shows."""

    def __init__(self, context: GradingContext, nodeid: str, task_id: str | None):
        self.context = context
        self.task_id = task_id
        self.seed = context.seed
        self.device = context.device
        self.gen = torch.Generator().manual_seed((context.seed ^ zlib.crc32(nodeid.encode())) & 0x7FFFFFFF)
        self.record: dict = {}
        self.reference = _Namespace(context.reference)

    # ---------------------------------------------------------------- inputs
    def randn(self, *shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0,
              device: str | None = None) -> torch.Tensor:
        """Standard normal values from this test's seeded generator."""
        values = torch.randn(*shape, generator=self.gen, dtype=torch.float64) * scale
        return values.to(dtype=dtype, device=device or self.device)

    def randint(self, low: int, high: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=self.gen)

    def rand_bool(self, *shape: int, p: float = 0.5) -> torch.Tensor:
        return torch.rand(*shape, generator=self.gen) < p

    # ------------------------------------------------------------ sections
    def section_for(self, name: str) -> str:
        manifest = self.context.manifest
        task = manifest.task_for_function(name) if manifest else None
        return task.section_text if task else ""

    def _forbidden_for(self, name: str) -> tuple[str, ...]:
        manifest = self.context.manifest
        if manifest is None or manifest.is_launcher(name):  # the course's launcher: no student host code
            return ()
        task = manifest.task_for_function(name)
        return task.forbidden if task else ()

    def _is_kernel_task(self, name: str) -> bool:
        """Whether `name` runs a Triton kernel of the student's (its task asks for a launch, or it is a
        launcher of the kernel contract)."""
        manifest = self.context.manifest
        task = manifest.task_for_function(name) if manifest else None
        return bool(task and ("triton_launch" in task.requires or manifest.is_launcher(name)))

    def _runs_a_kernel(self, name: str) -> bool:
        """Whether `name` runs a Triton kernel of the student's and this run interprets it on the CPU."""
        return self._is_kernel_task(name) and self.device == "cpu"

    # ---------------------------------------------------------------- calls
    def call_with_facts(self, name: str, *args, fresh_worker: bool = False,
                        track_tensors: bool = True, timeout_s: float | None = None,
                        **kwargs) -> tuple[object, CallFacts]:
        """Call the student's `name`; return its value and what the call did."""
        result: CallResult = self.context.runner_for(name).call(
            name, args, kwargs, forbidden=self._forbidden_for(name), track_tensors=track_tensors,
            device=self.device, fresh=fresh_worker, timeout_s=timeout_s)
        if result.output:
            self.record.setdefault("output", "")
            self.record["output"] = (self.record["output"] + result.output)[-4000:]
        self._raise_for(name, result, args, kwargs)
        if result.facts.forbidden_calls:
            groups = ", ".join(result.facts.forbidden_calls)
            helper = self._forbidden_through(name, tuple(result.facts.forbidden_calls), args, kwargs)
            self._problem(f"forbidden:{groups}", f"called a forbidden API ({groups})", through=helper)
            through = (f" It comes through your {helper}, which {name} calls: remove the forbidden call from "
                       f"{helper} (it costs {helper}'s task too)." if helper else "")
            raise StudentProblem(
                "forbidden",
                f"{name} called a forbidden API ({groups}). This task asks you to write that "
                f"part yourself, so it earns 0 until the call is removed "
                f"({self.section_for(name)}).{through}")
        if result.facts.mutated_inputs:
            changed = ", ".join(result.facts.mutated_inputs)
            self._problem("in_place", "changed its inputs in place")
            raise StudentProblem(
                "wrong", f"{name} changed its input in place ({changed}); "
                         f"callers still need their tensors: compute into new tensors instead "
                         f"(e.g. x * 2, not x.mul_(2)).")
        self._refuse_degenerate(name, result.value, args, kwargs)
        return result.value, result.facts

    def _problem(self, key: str, summary: str, text: str = "", **data) -> None:
        """Record what went wrong as data: a stable `key` (failures are grouped by it), a short
        `summary` and, where measured, the words and numbers behind it."""
        self.record["problem"] = {"key": key, "summary": summary, "text": text or summary, **data}

    def _diagnosed(self, found: Diagnosis | None, message: str) -> str:
        """Record `found` (if any) and append its explanation to `message`."""
        if found is None:
            return message
        self.record["diagnosis"] = found.to_dict()
        variant = found.variant_text()
        where = f"lecture {found.section}" + (f"; {found.handout}" if found.handout else "")
        return (message + f"\nLikely cause: {found.title}" + (f" (reproduced with {variant})" if variant else "")
                + f". {found.explanation} ({where}).")

    def _refuse_degenerate(self, name: str, value, args: tuple, kwargs: dict) -> None:
        """Fail a call that returned zeros, a constant, NaN or an input unchanged where the
        trusted reference does not (grader.harness.degenerate); free for an ordinary output."""
        found = degenerate.suspicions(value, args, kwargs)
        reference = self.context.reference.get(name)
        if not found or reference is None:
            return
        try:
            expected = reference(*args, **kwargs)
        except Exception:  # the reference cannot judge these inputs here: leave it to the test
            return
        suspicion = degenerate.unexplained(found, expected, args, kwargs)
        if suspicion is None:
            return
        if suspicion.kind == degenerate.CONSTANT and (
                not self._constant_elsewhere(name, suspicion, args, kwargs)
                or (self.context.mutants and diagnose(self.context.mutants, name, args, kwargs, value,
                                                      expected=expected) is not None)):
            # depends on the inputs (measured), or a known misconception computes it: a wrong value
            self._constant_here(name, suspicion, value, expected, args, kwargs)
        manifest = self.context.manifest
        kernels = manifest.contract.kernels_of(name) if manifest and manifest.is_launcher(name) else ()
        text = degenerate.message(name, suspicion, self.section_for(name), kernels)
        stored_nothing = bool(kernels) and (degenerate.stored_nothing(value) or self._kernels_untouched(kernels))
        self.record["measured"] = ("stored nothing of its own: the kernel is not written yet" if stored_nothing
                                   else degenerate.measured(suspicion))
        self._problem(f"degenerate:{suspicion.kind}", degenerate.summary(suspicion), self.record["measured"],
                      **({"nothing_stored": True} if stored_nothing else {}))
        if stored_nothing:
            raise StudentProblem("degenerate", f"your {' and '.join(kernels)} is not written yet: it stored nothing "
                                               f"(every output element is still the NaN the grader filled it with) "
                                               f"or it is still the handout's stub. Write it; if you did, check "
                                               f"that its tl.store calls run ({self.section_for(name)}).")
        found = self._through_helper(name, args, kwargs, value, None, None)
        if found is None and self.context.mutants:
            found = diagnose(self.context.mutants, name, args, kwargs, value, expected=expected)
        found = found or self._source_hint(name)
        if found is None and suspicion.kind == degenerate.NAN:  # NaN from a finite oracle may be an overflow;
            found = self._precision(value, expected, suspicion.item, (name, args, kwargs))  # zeros never are
        raise StudentProblem("degenerate", self._diagnosed(found, text))

    def _helper_runs(self, name: str, composition: Composition, helper: str, args: tuple, kwargs: dict):
        """`composition` of `name` computed with the student's `helper` (called in the sandbox) and the
        reference's other helpers: (its result, [what the student's helper did wrong, per call], [forbidden
        groups the student's helper called]); None when the student's helper did not return a value."""
        wrong: list[str] = []
        forbidden: list[str] = []

        def student_helper(*a, **k):
            result: CallResult = self.context.runner_for(helper).call(
                helper, a, k, forbidden=self._forbidden_for(helper) or self._forbidden_for(name),
                track_tensors=False, device=self.device)
            if result.status != "ok":
                raise _HelperFailed(helper)
            forbidden.extend(g for g in result.facts.forbidden_calls if g not in forbidden)
            difference = self._difference(result.value, self.context.reference[helper](*a, **k), None, None, None)
            if difference is not None:
                wrong.append(difference.text)
            return result.value

        helpers = {h: (student_helper if h == helper else self.context.reference[h]) for h in composition.uses}
        try:
            with torch.no_grad():
                produced = composition.fn(helpers, *args, **kwargs)
        except _HelperFailed:
            return None
        except Exception:  # the student's helper output does not fit the rest: not this helper's doing alone
            produced = None
        return produced, wrong, forbidden

    def _through_helper(self, name: str, args: tuple, kwargs: dict, actual, rtol, atol) -> Diagnosis | None:
        """One bug, one cause: the student's helper (a function of another task that `name` may call, as the
        handout says) that is wrong on the inputs `name` gives it and, with the rest computed by the course
        from its output, reproduces the student's wrong result. Measured on the trusted side."""
        manifest = self.context.manifest
        for composition in self.context.compositions:
            if composition.function != name or not all(h in self.context.reference for h in composition.uses):
                continue
            for helper in composition.uses:
                ran = self._helper_runs(name, composition, helper, args, kwargs)
                if ran is None:
                    continue
                produced, wrong, _ = ran
                if not wrong or produced is None or not outputs_match(actual, produced, rtol, atol, equal_nan=True):
                    continue
                task = manifest.task_for_function(helper) if manifest else None
                task_words = f" (task {task.id})" if task and task.id != helper else ""
                section = task.section_text if task else self.section_for(name)
                return Diagnosis(
                    f"through:{helper}", f"your {helper}{task_words} is wrong, and {name} uses it", section,
                    f"Fix {helper} first: on the inputs {name} gives it, {wrong[0]}. The course's own code, given "
                    f"your {helper}'s output, reproduces your {name} result exactly, so {name} may be right once "
                    f"{helper} is; its points depend on {helper}, as the handout says",
                    source="dependency")
        return None

    def _forbidden_through(self, name: str, groups: tuple[str, ...], args: tuple, kwargs: dict) -> str:
        """The student's helper (a function of another task that `name` may call) through which `name`
        reached a forbidden API (`groups`): the one that reaches the same groups when called on the inputs
        `name` gives it; '' when no such helper does."""
        for composition in self.context.compositions:
            if composition.function != name or not all(h in self.context.reference for h in composition.uses):
                continue
            for helper in composition.uses:
                ran = self._helper_runs(name, composition, helper, args, kwargs)
                if ran is not None and ran[2] and set(groups) <= set(ran[2]):
                    return helper
        return ""

    def _constant_elsewhere(self, name: str, suspicion: degenerate.Suspicion, args: tuple, kwargs: dict) -> bool:
        """Whether `name` returns the same constant on other inputs too: every floating-point tensor argument
        drawn afresh (same shape, dtype and device; masks, positions and flags kept). Only a result measured
        not to depend on the inputs is called a placeholder; a call that fails on the fresh draw proves
        nothing, so it counts as depending on them."""
        gen = torch.Generator().manual_seed((self.seed * 7919 + zlib.crc32(name.encode())) & 0x7FFFFFFF)

        def fresh(value):
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
                drawn = torch.randn(value.shape, generator=gen, dtype=torch.float64)
                return drawn.to(dtype=value.dtype, device=value.device)
            return value

        redrawn_args = tuple(fresh(a) for a in args)
        redrawn_kwargs = {k: fresh(v) for k, v in kwargs.items()}
        if all(a is b for a, b in zip(redrawn_args, args, strict=True)) and \
                all(redrawn_kwargs[k] is v for k, v in kwargs.items()):
            return True  # nothing to vary: the value can only depend on what stayed the same
        result: CallResult = self.context.runner_for(name).call(
            name, redrawn_args, redrawn_kwargs, forbidden=self._forbidden_for(name), track_tensors=False,
            device=self.device)
        if result.status != "ok":
            return False
        again = [s for s in degenerate.suspicions(result.value, redrawn_args, redrawn_kwargs)
                 if s.kind == degenerate.CONSTANT and s.item == suspicion.item and s.detail == suspicion.detail]
        return bool(again)

    def _constant_here(self, name: str, suspicion: degenerate.Suspicion, value, expected, args: tuple,
                       kwargs: dict) -> None:
        """Fail a result that is constant on these inputs but depends on the inputs (measured), or that a mutant
        of the catalogue computes: a wrong value, not a placeholder, explained by the catalogue or its precision
        first (an overflow guarded to 0, say)."""
        what = "its result" if suspicion.item is None else f"item {suspicion.item} of its result"
        measured = f"{what} is {suspicion.detail} on these inputs"
        self.record["measured"] = measured
        self._problem("values:constant_here", "the same number everywhere on these inputs", measured,
                      constant=suspicion.detail, item=suspicion.item)
        found = self._through_helper(name, args, kwargs, value, None, None)
        if found is None and self.context.mutants:
            found = diagnose(self.context.mutants, name, args, kwargs, value, expected=expected)
        found = found or self._source_hint(name)
        if found is None:
            found = self._precision(value, expected, suspicion.item, (name, args, kwargs))
        section = self.section_for(name)
        message = f"{name}: {measured}, where the right answer is not constant."
        if found is None and section:
            message += f"\nSee lecture {section}."
        raise StudentProblem("wrong", self._diagnosed(found, message))

    def raises(self, name: str, *args, exception: str, because: str, **kwargs) -> None:
        """The student's `name(*args, **kwargs)` must raise `exception` (a built-in exception's name,
        e.g. "ValueError"): `because` says why those inputs are refused, for the message."""
        result: CallResult = self.context.runner_for(name).call(
            name, args, kwargs, forbidden=self._forbidden_for(name), device=self.device)
        error = result.error or {}
        if result.status == "raised" and error.get("type") == exception and not error.get("not_implemented"):
            return
        if result.status == "ok":
            self._problem("did_not_raise", f"did not raise {exception}")
            raise AssertionError(f"{name} returned a value for inputs it must refuse ({because}): raise "
                                 f"{exception} with a message that says what is wrong"
                                 + (f" ({self.section_for(name)})." if self.section_for(name) else "."))
        if result.status == "raised" and not error.get("not_implemented"):
            kind = str(error.get("type"))
            self._problem(f"raised_other:{kind}", f"raised {kind} instead of {exception}")
            raise AssertionError(f"{name} raised {kind} ({error.get('message', '')}) for inputs it must refuse "
                                 f"({because}); the contract asks for {exception}.")
        self._raise_for(name, result, args, kwargs)

    def call(self, name: str, *args, **kwargs):
        """Call the student's `name`; its value, or a failure that explains what went wrong."""
        value, _ = self.call_with_facts(name, *args, track_tensors=False, **kwargs)
        return value

    def _raise_for(self, name: str, result: CallResult, args: tuple = (), kwargs: dict | None = None) -> None:
        """A StudentProblem for every status but "ok", with its problem recorded as data; an
        exception is diagnosed on the same inputs (Triton API problems, then the catalogue)."""
        if result.status == "ok":
            return
        section = self.section_for(name)
        error = result.error or {}
        where = ""
        if error.get("frames"):
            where = "\n  " + "\n  ".join(error["frames"][-3:])
        manifest = self.context.manifest
        rule = self._contract_rule_hint(name) if result.status == "raised" else None
        if rule is not None:  # a decorated contract kernel: the rule, whatever the launch raised
            kind, text = str(error.get("type")), str(error.get("message"))
            self.record["measured"] = f"raised {kind}: {text}"
            self._problem(f"contract:{rule.mutant_id}", rule.title, self.record["measured"] + where)
            raise StudentProblem("raised", self._diagnosed(rule, f"{name} raised {kind}: {text}{where}"))
        if result.status == "raised" and error.get("not_implemented") and manifest and manifest.is_launcher(name):
            self._problem("not_implemented", "kernel not written yet")
            raise StudentProblem("not_implemented",
                                 f"{error.get('message')}: not implemented yet. Write it with exactly that "
                                 f"signature, since the grader launches your kernel itself "
                                 f"({manifest.contract.module} shows how)"
                                 + (f" ({section})." if section else "."))
        if result.status == "raised" and error.get("not_implemented"):
            self._problem("not_implemented", "not implemented yet")
            raise StudentProblem("not_implemented",
                                 f"{name} is not implemented yet (it raises NotImplementedError). "
                                 f"Write it following its docstring"
                                 + (f" ({section})." if section else "."))
        if result.status == "raised":
            kind, text = str(error.get("type")), str(error.get("message"))
            measured = f"raised {kind}: {text}"
            self.record["measured"] = measured
            self._problem(f"raised:{kind}:{normalised_message(text, digits=False)}"[:400],
                          f"raised {kind}: {text.splitlines()[0] if text else ''}"[:240], measured + where,
                          frames=list(error.get("frames") or [])[-3:])
            found = explain_exception(error) or self._allocation_hint(name, text, args, kwargs or {})
            if found is None and self.context.mutants:
                found = diagnose(self.context.mutants, name, args, kwargs or {}, raised=error)
            message = f"{name} {measured}{where}"
            if found is None:
                message += "\n" + raised_advice(name, kind, args, kwargs or {}, section)
            raise StudentProblem("raised", self._diagnosed(found, message))
        if result.status == "missing":
            self._problem("missing", "function missing")
            raise StudentProblem("missing", f"no function named {name} was found in your files: "
                                            f"check its spelling and that it is at module level.")
        if result.status == "import_failed":
            self._problem(f"import_failed:{result.detail}", f"your module {result.detail} could not be imported",
                          error=f"{error.get('type')}: {error.get('message')}")
            raise StudentProblem("import_failed",
                                 f"your module {result.detail} could not be imported, so {name} "
                                 f"could not run: {error.get('type')}: {error.get('message')}{where}")
        if result.status == "timeout":
            self._problem("timeout", "did not finish in time", result.detail)
            raise StudentProblem("timeout", f"{name} did not finish: it {result.detail}. Look for "
                                            f"an endless loop or work that grows too fast.")
        if result.status in ("crashed", "crashed_before"):
            crash = error.get("crash", result.detail) if result.status == "crashed_before" else result.detail
            inputs = call_inputs(args, kwargs or {})
            shown = inputs_words(inputs)
            self.record["measured"] = f"ended the process ({crash}) on {shown}"
            self._problem(f"crashed:{normalised_message(crash, digits=False)}", f"ended the process: it {crash}",
                          self.record["measured"], inputs=inputs, repeated=result.status == "crashed_before")
            found = KERNEL_CRASH_HINT if self._runs_a_kernel(name) else None
            if result.status == "crashed_before":
                message = f"{name} was not run: it {result.detail}. Those inputs: {shown}."
            else:
                message = (f"calling {name} ended the process: it {result.detail}, on {shown}. Your code was "
                           f"started again for the next test.")
            raise StudentProblem("crashed", self._diagnosed(found, message))
        if result.status == "unsupported":
            self._problem("unsupported", "returned something that is not a tensor", result.detail)
            raise StudentProblem("unsupported", f"{name} returned something that is not a tensor "
                                                f"or a tuple of tensors: {result.detail}.")
        if result.status == "disk":
            self._problem("disk", "wrote files up to the write budget", result.detail, **result.error)
            raise StudentProblem("disk", f"{name} was stopped: {result.detail}. Write fewer or smaller files, "
                                         f"or keep the data in memory.")
        if result.status == "budget":
            self._problem("budget", "the submission's time budget was used up", result.detail)
            raise StudentProblem("budget", f"{name} was not run: {result.detail}.")
        self._problem(f"crashed:{result.status}", f"{result.status} {result.detail}")
        raise StudentProblem("crashed", f"{name}: {result.status} {result.detail}")

    # ------------------------------------------------------------ judging
    def expect(self, condition: bool, message: str, section: str = "") -> None:
        """A property check with a teaching message."""
        if not condition:
            self._problem("property:" + normalised_message(message, digits=False)[:300],
                          "a property the result must have does not hold", message)
            raise AssertionError(f"{message} ({section})" if section else message)

    def holds(self, prop: str, actual, expected, *, section: str, rtol: float | None = None,
              atol: float | None = None, diagnose_with: tuple | None = None) -> None:
        """A property every correct answer has (a metamorphic relation between two calls).

        `actual` is the student's output on transformed inputs; `expected` is what the property
        says it must be (the student's own output on the original inputs, transformed, or the
        grader's own computation). One tolerance, the test's or the dtype's. A failure names the
        property and `section`, in the message and as data (problem['property']). The catalogue is
        asked only through `diagnose_with`, the call whose output `actual` is, and only when that
        output differs from the reference's on the same inputs: a relation between two calls does
        not say which one is wrong."""
        difference = self._difference(actual, expected, rtol, atol, None)
        if difference is None:
            return
        found = None
        if diagnose_with is not None and self.context.mutants:
            name, args, kwargs = diagnose_with  # asked only when that call is wrong by itself:
            right = self.context.reference[name](*args, **kwargs)
            if self._difference(actual, right, rtol, atol, None):
                found = diagnose(self.context.mutants, name, args, kwargs, actual, rtol, atol, expected=right)
        self.record["measured"] = difference.text
        self._problem(f"property:{prop}"[:300], f"a property of attention does not hold: {prop}",
                      f"{prop}: not so ({difference.text})", property=prop, section=section,
                      difference=difference.to_dict())
        message = f"A property every correct answer has does not hold: {prop}. {difference.text}."
        if found is None:
            message += f"\nSee lecture {section}."
        raise AssertionError(self._diagnosed(found, message))

    def close(self, name: str, *args, expected=None, rtol: float | None = None,
              atol: float | None = None, heatmap: int | bool | None = None,
              region: torch.Tensor | None = None, **kwargs):
        """Student's `name(*args, **kwargs)` must match the reference (or `expected`).

        Every other keyword (a `mask=` included) goes to both functions; `region` is a
        bool tensor of the output's shape that says which part counts as "allowed" when
        a difference is described."""
        actual = self.call(name, *args, **kwargs)  # fails if the call changed its inputs
        if expected is None:
            expected = self.context.reference[name](*args, **kwargs)
        self.compare(actual, expected, what=name, rtol=rtol, atol=atol, heatmap=heatmap,
                     diagnose_with=(name, args, kwargs), region=region)
        return actual

    def compare(self, actual, expected, *, what: str, rtol: float | None = None,
                atol: float | None = None, heatmap: int | bool | None = None,
                diagnose_with: tuple | None = None, region: torch.Tensor | None = None,
                section: str | None = None) -> None:
        """Compare structure, shape, dtype, device and values; explain any difference.

        One tolerance decides and explains: the test's (rtol, atol) where given, else the
        dtype's (grader.core.tolerances), for the verdict, the measured description and the
        catalogue's match alike."""
        section = section if section is not None else self.section_for(what)
        difference = self._difference(actual, expected, rtol, atol, region)
        if heatmap is not None and heatmap is not False:
            self._attach_heatmap(actual, expected, heatmap)
        if difference is None:
            return
        only = _only_form(actual, expected, rtol, atol) if difference.key in FORM_KEYS else None
        if only is not None:  # the values are right: say exactly what differs (and a mistake that makes it)
            self.record["measured"] = difference.text
            self.record["problem"] = {**difference.to_dict(), "key": f"only:{difference.key}",
                                      "summary": f"right values, wrong {only}", "values_right": True}
            found = None
            if diagnose_with is not None and self.context.mutants:
                name, args, kwargs = diagnose_with
                found = diagnose(self.context.mutants, name, args, kwargs, actual, rtol, atol, expected=expected)
            raise AssertionError(self._diagnosed(found, f"{what}: {difference.text}. Only the {only} is wrong: the "
                                                        f"values themselves are right, so change nothing in the "
                                                        f"computation; return the {only} the contract asks for"
                                                        + (f" ({section})." if section else ".")))
        found = None
        if diagnose_with is not None:
            name, args, kwargs = diagnose_with
            found = self._through_helper(name, args, kwargs, actual, rtol, atol)
            if found is None and self.context.mutants:
                found = diagnose(self.context.mutants, name, args, kwargs, actual, rtol, atol, expected=expected)
            if found is None:
                found = self._source_hint(name, actual, expected)
        self.record["measured"] = difference.text
        self.record["problem"] = difference.to_dict()
        if found is None:
            found = self._precision(actual, expected, difference.data.get("item"), diagnose_with)
        message = f"{what}: {difference.text}."
        if found is None and section:
            message += f"\nSee lecture {section}."
        raise AssertionError(self._diagnosed(found, message))

    def returns_kernel_output(self, name: str, actual, launched, expected, *, launched_with: str = "",
                              diagnose_with: tuple | None = None) -> None:
        """The student's host function `name` returned `actual`; `launched` is what the student's own
        kernel writes for the same inputs when the grader launches it through the kernel contract
        (`launched_with` says how), `expected` the right answer.

        Passes when `actual` is `launched` bit for bit: the result is the kernel's. Otherwise, when the
        kernel itself is right, `actual` is compared with `expected` (a host mistake, diagnosed as
        usual); in every case it fails saying the result is not the kernel's. A wrong kernel whose
        output the host returns unchanged passes here: the kernel's own task pays for it."""
        if isinstance(actual, torch.Tensor) and isinstance(launched, torch.Tensor) and \
                actual.shape == launched.shape and actual.dtype == launched.dtype and torch.equal(actual, launched):
            return
        if self._difference(launched, expected, None, None, None) is None:
            self.compare(actual, expected, what=name, diagnose_with=diagnose_with)
        how = f" (launched by the grader with {launched_with})" if launched_with else ""
        self.expect(False, f"{name} returned values that are not what your kernel writes for the same inputs{how}: "
                           f"launch it as the kernel contract does and return its output unchanged, computed by the "
                           f"kernel alone", self.section_for(name))

    def _precision(self, actual, expected, item: int | None, diagnose_with: tuple | None) -> Diagnosis | None:
        """What the errors of a wrong tensor (item `item` of a returned tuple) say about the precision it was
        computed in (grader.harness.precision): measured against a float64 oracle in units of the dtype's
        rounding. The profile is kept as data in the problem recorded for this test."""
        if item is not None and isinstance(expected, (tuple, list)) and isinstance(actual, (tuple, list)) and \
                len(actual) == len(expected) > item:
            actual, expected = actual[item], expected[item]
        if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)) or \
                not expected.is_floating_point() or actual.shape != expected.shape or actual.dtype != expected.dtype:
            return None
        name, args, kwargs = diagnose_with if diagnose_with is not None else ("", (), {})
        manifest = self.context.manifest
        launcher = bool(manifest and name and manifest.is_launcher(name))
        reference = None if launcher or diagnose_with is None else self.context.reference.get(name)
        exact = precision.oracle(reference, args, kwargs, expected, item)
        found, profile = precision.explain(actual, exact, expected.dtype, args, kwargs)
        if profile is not None and isinstance(self.record.get("problem"), dict):
            self.record["problem"]["precision"] = profile.to_dict()
        return found

    def _source_hint(self, name: str, actual=None, expected=None) -> Diagnosis | None:
        """A problem seen in the submitted source that the device computes wrongly without an error:
        tl.bfloat16 in Triton's interpreter; on a GPU, a float32 result off by TF32's rounding from a
        kernel with a tl.dot that does not ask for IEEE products."""
        if not self._is_kernel_task(name):
            return None
        sources = getattr(self.context.runner_for(name), "sources", None)
        text = "\n".join(sources().values()) if callable(sources) else ""
        if self.device == "cpu":
            return BF16_HINT if BF16_IN_KERNEL.search(text) else None
        if dots_without_ieee(text) and tf32_sized(actual, expected):
            return TF32_HINT
        return None

    def _allocation_hint(self, name: str, message: str, args: tuple, kwargs: dict) -> Diagnosis | None:
        """An allocation the worker's memory limit refused (torch's allocator message), in words: how much,
        and when it is a whole L × L matrix (or a few of them) for the inputs' length L, that it is."""
        match = ALLOCATION.search(message)
        if match is None:
            return None
        wanted = int(match.group(1).replace(",", ""))
        tensors = [t for t in [*args, *kwargs.values()] if isinstance(t, torch.Tensor) and t.dim() >= 2]
        square = ""
        for t in tensors:
            length, size = t.shape[-2], t.element_size()
            if length > 1 and wanted % (length * length * size) == 0 and wanted // (length * length * size) <= 4096:
                count = wanted // (length * length * size)
                square = (f", {'an' if count == 1 else f'{count:,}'} L × L matri{'x' if count == 1 else 'ces'} of "
                          f"{str(t.dtype).removeprefix('torch.')} for L = {length}")
                break
        section = self.section_for(name)
        return Diagnosis(
            "allocation_too_large", f"{name} asked for {wanted / 2**30:.2f} GiB at once", section,
            f"The call tried to allocate {wanted:,} bytes in one tensor{square}, more than the grader's worker "
            f"may use. Compute in blocks so that no tensor grows with the square of the length (for a sliding "
            f"window, each block of queries against only the keys its window reaches)", source="measured")

    def _kernels_untouched(self, kernels: tuple[str, ...]) -> bool:
        """Whether every one of `kernels` in the submitted kernel file is still the handout stub's own (the same
        syntax tree, comments and layout aside): nothing of the student's was run."""
        manifest = self.context.manifest
        stub = self.context.stub_sources.get(manifest.contract.file) if manifest and manifest.contract else None
        sources = getattr(self.context.runner, "sources", None)
        submitted = (sources() if callable(sources) else {}).get(manifest.contract.file) if stub else None
        if not stub or not submitted:
            return False
        try:
            ours, theirs = scan_module(ast.parse(stub)), scan_module(ast.parse(submitted))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
        return all(k in ours.jit and k in theirs.jit and ast.dump(ours.jit[k]) == ast.dump(theirs.jit[k])
                   for k in kernels)

    def _contract_rule_hint(self, name: str) -> Diagnosis | None:
        """For a launcher of the kernel contract: a kernel it launches that the submitted source decorates with
        more than @triton.jit (the static check refuses it too; this names the rule in the test's own message)."""
        manifest = self.context.manifest
        if manifest is None or manifest.contract is None or not manifest.is_launcher(name):
            return None
        sources = getattr(self.context.runner, "sources", None)  # the submitted files, as handed in
        kernels = manifest.contract.kernels_of(name)
        for text in (sources() if callable(sources) else {}).values():
            try:
                scope = scan_module(ast.parse(text))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for kernel in kernels:
                if scope.decorated.get(kernel):
                    return contract_decorator_hint(kernel, scope.decorated[kernel])
        return None

    def _difference(self, actual, expected, rtol, atol, region) -> Difference | None:
        if isinstance(expected, (tuple, list)):
            if not isinstance(actual, (tuple, list)):
                return Difference(f"expected a tuple of {len(expected)} values, got {type(actual).__name__}",
                                  "structure", "not the tuple asked for")
            if len(actual) != len(expected):
                return Difference(f"expected {len(expected)} values, got {len(actual)}", "structure",
                                  "not the tuple asked for")
            for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
                problem = self._difference(a, e, rtol, atol, region)
                if problem is not None:
                    return problem.within(i)
            return None
        if isinstance(expected, torch.Tensor):
            if not isinstance(actual, torch.Tensor):
                return Difference(f"expected a tensor, got {type(actual).__name__}", "structure",
                                  "not a tensor")
            if actual.shape != expected.shape:
                return Difference(f"shape {tuple(actual.shape)} but expected {tuple(expected.shape)} "
                                  f"(check which dimensions you reduce, transpose or broadcast)", "shape",
                                  "wrong shape", {"shape": list(actual.shape), "expected_shape": list(expected.shape)})
            if actual.dtype != expected.dtype:
                return Difference(f"dtype {actual.dtype} but expected {expected.dtype} (keep the input's dtype)",
                                  "dtype", "wrong dtype")
            if actual.device.type != expected.device.type:
                return Difference(f"on device {actual.device} but expected {expected.device}", "device",
                                  "on the wrong device")
            if expected.dtype == torch.bool:
                if torch.equal(actual.cpu(), expected.cpu()):
                    return None
                wrong = int((actual.cpu() != expected.cpu()).sum())
                measured = measure_difference(actual.float(), expected.float(), region, 0.0, 0.0)
                key = measured.key.replace("values", "entries", 1)
                return Difference(f"{wrong} of {expected.numel()} entries differ; {measured.text}", key,
                                  measured.summary.replace("values out of tolerance", "wrong entries"),
                                  {**measured.data, "wrong_entries": wrong})
            r, a = tolerance_for(expected.dtype)
            r, a = (rtol if rtol is not None else r), (atol if atol is not None else a)
            if outputs_match(actual, expected, r, a):
                return None
            return measure_difference(actual, expected, region, r, a)
        if isinstance(expected, (int, float)):
            if not isinstance(actual, (int, float)) or isinstance(actual, bool):
                return Difference(f"expected a number, got {type(actual).__name__}", "structure", "not a number")
            r = rtol if rtol is not None else 1e-9
            if abs(actual - expected) <= (atol or 0.0) + r * abs(expected):
                return None
            return Difference(f"got {actual!r}, expected {expected!r}", "number", "wrong number")
        if actual != expected:
            return Difference(f"got {actual!r}, expected {expected!r}", "value", "wrong value")
        return None

    def _attach_heatmap(self, actual, expected, which) -> None:
        """The (query × key) window of the slice that differs most, for the report's heatmaps.

        Every leading index (batch, head) is one slice; the one with the largest absolute
        difference is shown, cropped to HEATMAP_SIZE rows and columns around its worst cell."""
        def pick(value):
            if isinstance(which, bool):
                return value
            return value[which] if isinstance(value, (tuple, list)) and len(value) > which else None

        a, e = pick(actual), pick(expected)
        if not (isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor)) or a.dim() < 2:
            return
        if a.shape != e.shape:
            return
        n_rows, n_cols = a.shape[-2], a.shape[-1]
        a3 = a.detach().float().cpu().reshape(-1, n_rows, n_cols)  # (S, Lq, Lk): one slice per batch/head index
        e3 = e.detach().float().cpu().reshape(-1, n_rows, n_cols)  # (S, Lq, Lk)
        same_inf = torch.isinf(a3) & (a3 == e3)
        diff = torch.where(same_inf, 0.0, (a3 - e3).abs()).nan_to_num(nan=math.inf)  # (S, Lq, Lk)
        if diff.numel() == 0:
            return
        per_slice = diff.reshape(diff.shape[0], -1).amax(dim=1)  # (S,)
        worst_slice = int(torch.argmax(per_slice))
        worst_cell = int(torch.argmax(diff[worst_slice]))
        row, col = divmod(worst_cell, n_cols)
        top = min(max(0, row - HEATMAP_SIZE // 2), max(0, n_rows - HEATMAP_SIZE))
        left = min(max(0, col - HEATMAP_SIZE // 2), max(0, n_cols - HEATMAP_SIZE))
        rows, cols = slice(top, top + HEATMAP_SIZE), slice(left, left + HEATMAP_SIZE)
        index = []
        rest = worst_slice
        for size in reversed(a.shape[:-2]):
            index.append(rest % size)
            rest //= size
        largest = float(per_slice[worst_slice])
        self.record["heatmap"] = {
            "student": a3[worst_slice, rows, cols].tolist(), "reference": e3[worst_slice, rows, cols].tolist(),
            "slice": list(reversed(index)), "rows": [top, min(n_rows, top + HEATMAP_SIZE)],
            "cols": [left, min(n_cols, left + HEATMAP_SIZE)],
            "max_diff": largest if math.isfinite(largest) else 1e30,
        }

    # -------------------------------------------------------------- timing
    def time_against(self, name: str, reference_fn, case) -> None:
        """Time the student's `name` against `reference_fn` on `case` (a grader.harness.timing.TimingCase).

        Pending without a timing device. The measurement (the trusted clock's ratio,
        whether every timed output checked out) goes into the record; the points come
        from the manifest's speed thresholds, in grader.core.scoring."""
        from grader.harness.timing import TimingFailed, compare_speed

        device = self.context.timing_device
        if device is None:
            self.pending("not timed: no CUDA device")
        if self.task_id in self.context.zeroed_tasks:  # no speed point to earn: the device's time is not spent
            self.pending("not timed: a finding of the static check already gives this task no points (the "
                         "task's reason says which); once it is fixed, the kernel is timed")
        try:
            result = compare_speed(self.context.runner_for(name), name, reference_fn, case, device=device,
                                   seed=self.gen.initial_seed())
        except TimingFailed as exc:
            self._problem("timing:failed", "could not be timed", str(exc))
            raise StudentProblem("raised", f"{name} could not be timed: {exc}") from None
        section = self.section_for(name) or "§24"
        timing = {**result.to_dict(), "cpu_timed": device == "cpu"}  # scoring reads "scored_ratio"
        if case.flops:
            timing["student_tflops"] = case.flops / (result.student.median_ms * 1e-3) / 1e12
            timing["reference_tflops"] = case.flops / (result.reference.median_ms * 1e-3) / 1e12
        self.record["timing"] = timing
        if not result.verified:
            self._problem("timing:unverified", "timed outputs do not match the reference", result.problems[0])
            raise AssertionError(f"{name}: the outputs of the timed calls do not match the reference "
                                 f"({result.problems[0]}), so the timing earns no speed credit: every timed "
                                 f"call must compute its whole output from its own inputs ({section}).")
        where = "CPU-timed, " if device == "cpu" else ""
        rate = f", {timing['student_tflops']:.1f} TFLOP/s" if case.flops and device != "cpu" else ""
        clock = "each call's own time" if result.measured_by == "kernel" else "the grader's clock around each block"
        tie = ", a tie: the intervals overlap" if result.verdict == "tie" else ""
        self.record["detail"] = (f"{result.ratio:.2f}× the reference time (95% interval {result.ratio_low:.2f}–"
                                 f"{result.ratio_high:.2f}{tie}; {where}{result.student.median_ms:.3f} ms vs "
                                 f"{result.reference.median_ms:.3f} ms per call, {clock}, {result.rounds} paired "
                                 f"rounds{rate})")

    def award(self, fraction: float, detail: str) -> None:
        """Partial credit for this test (timing): 0 ≤ fraction ≤ 1."""
        self.record["fraction"] = max(0.0, min(1.0, float(fraction)))
        self.record["detail"] = detail

    def pending(self, reason: str) -> None:
        """Stop here: this test cannot be judged on this machine."""
        raise Pending(reason)

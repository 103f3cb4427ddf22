"""A contract's kernels compiled for a GPU on the CPU, before any of them runs in the interpreter.

Triton's interpreter runs a kernel as Python, so it runs kernels a GPU compiler refuses (a
`tl.arange` bound that is not a constexpr, a Python call at compile time). So the kernel file
the kernel worker gets (grader.intake.kernels' vetted copy: triton imports, plain-number
constants, the @triton.jit functions) is compiled for `TARGET` to TTIR, Triton's first stage,
at each launch the hidden tests make (the contract module's `specialisations()`), and a kernel
Triton refuses gets a KernelProblem with Triton's message and the line in the student's file.

Where: on the trusted side, in a child process started without TRITON_INTERPRET (Triton picks
the interpreter when a kernel is defined), with a time and memory limit. The child executes only
the vetted copy, whose names all resolved to Triton's (grader.intake.kernels), and the course's
contract module; it parses and compiles, never launches. Results are cached by the vetted source,
the contract, the Triton version and the target, in the user's cache. Where this Triton cannot compile for the target
here, the check says so as data (`GpuCompile.status == "skipped"` and why) and costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

from grader.intake.kernels import COMPILE, KernelProblem

TARGET = ("cuda", 90, 32)  # backend, compute capability (sm_90), warp size
TIMEOUT_S = 180
MEMORY_BYTES = 8 << 30
CACHE_FILE = "gpu_compile.json"
CACHE_ENTRIES = 2000  # the oldest go first


@dataclass(frozen=True)
class GpuCompile:
    """What compiling a contract's kernels for a GPU found."""

    status: str  # "compiled" (every launch compiled), "failed" (problems), or "skipped" (why)
    why: str  # for skipped: what this machine or Triton lacks
    problems: tuple[KernelProblem, ...]
    launches: int  # the specialisations compiled
    cached: bool = False

    def summary(self) -> str:
        """One line for the record's versions: what was compiled, or why not."""
        target = f"{TARGET[0]} sm_{TARGET[1]}"
        if self.status == "skipped":
            return f"skipped: {self.why}"
        return f"{self.status}: {self.launches} launches to TTIR for {target}"  # the same when cached (replay)


def user_cache_dir() -> Path:
    """Where the results are kept: the user's cache ($XDG_CACHE_HOME or ~/.cache), never the course."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attention-grader"


def _key(source: str, contract: str) -> str:
    import triton

    text = json.dumps([source, contract, triton.__version__, TARGET])
    return hashlib.sha256(text.encode()).hexdigest()


def _read_cache(path: Path) -> dict:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_cache(path: Path, key: str, entry: dict) -> None:
    from grader.core.files import write_atomic

    cache = _read_cache(path)
    cache.pop(key, None)
    cache[key] = entry
    while len(cache) > CACHE_ENTRIES:
        cache.pop(next(iter(cache)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(cache).encode())
    except OSError:  # a read-only course: the check still ran
        pass


def _limits() -> None:  # pragma: no cover - runs in the child before exec
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def compile_for_gpu(filename: str, source: str, contract_file: Path, cache_dir: Path | None,
                    timeout_s: float = TIMEOUT_S) -> GpuCompile:
    """Compile the vetted kernel file `source` (named `filename`, as the contract imports it) for
    TARGET at each of the contract's specialisations; cached in `cache_dir` (None: no cache)."""
    contract = contract_file.read_text(encoding="utf-8")
    cache = cache_dir / CACHE_FILE if cache_dir is not None else None
    key = _key(source, contract)
    if cache is not None:
        entry = _read_cache(cache).get(key)
        if isinstance(entry, dict):
            try:
                return _result(entry, cached=True)
            except (KeyError, TypeError, ValueError):
                pass
    request = {"filename": filename, "source": source, "contract": contract, "module": contract_file.stem}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    here = str(Path(__file__).resolve().parents[2])  # the folder that holds grader/, installed or not
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="grade-gpu-compile-") as work:
        env["TRITON_CACHE_DIR"] = str(Path(work) / "triton-cache")
        try:
            done = subprocess.run([sys.executable, "-m", "grader.intake.gpu_compile"], input=json.dumps(request),
                                  capture_output=True, text=True, timeout=timeout_s, env=env, cwd=work,
                                  preexec_fn=_limits)
        except subprocess.TimeoutExpired:
            return GpuCompile("skipped", f"compiling took longer than {timeout_s:.0f} s", (), 0)
    lines = done.stdout.strip().splitlines()
    try:
        entry = json.loads(lines[-1])
        result = _result(entry)
    except (IndexError, ValueError, KeyError, TypeError):
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return GpuCompile("skipped", f"the compiler process failed: {tail[:300]}", (), 0)
    if cache is not None and result.status != "skipped":
        _write_cache(cache, key, entry)
    return result


def _result(entry: dict, cached: bool = False) -> GpuCompile:
    problems = tuple(KernelProblem(p["kernel"], int(p["line"]), p["text"], COMPILE) for p in entry["problems"])
    return GpuCompile(entry["status"], entry.get("why", ""), problems, int(entry["launches"]), cached)


# ----------------------------------------------------------------------------- the child process


def _error_line(exc: BaseException, def_line: int) -> int:
    """The line of the student's file that Triton's CompilationError points at (else the kernel's def).
    Triton numbers the lines of a kernel's source from its `def` line."""
    node = getattr(exc, "node", None)
    line = getattr(node, "lineno", None)
    return def_line + line - 1 if isinstance(line, int) and line > 0 else def_line


def _error_text(exc: BaseException) -> str:
    """Triton's own message, without the source excerpt it quotes."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    message = lines[-1] if lines else type(exc).__name__
    cause = exc.__cause__ or exc.__context__
    if message.startswith("at ") and cause is not None:
        message = str(cause).strip().splitlines()[-1] if str(cause).strip() else type(cause).__name__
    return f"{type(exc).__name__}: {message}"[:400]


PROBE = """import triton
import triton.language as tl


@triton.jit
def _probe(X, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs, mask=offs < N) * 2, mask=offs < N)
"""


def _compile_all(request: dict) -> dict:  # pragma: no cover - runs in the child
    import importlib

    work = Path.cwd()
    (work / request["filename"]).write_text(request["source"], encoding="utf-8")
    (work / f"{request['module']}.py").write_text(request["contract"], encoding="utf-8")
    sys.path.insert(0, str(work))
    try:
        from triton._C.libtriton import ir
        from triton.backends import backends
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as exc:
        return {"status": "skipped", "why": f"this Triton has no GPU compiler here ({exc})", "problems": [],
                "launches": 0}
    backend_name = "nvidia" if TARGET[0] == "cuda" else TARGET[0]
    if backend_name not in backends:
        return {"status": "skipped", "why": f"this Triton has no {backend_name} backend", "problems": [],
                "launches": 0}
    target = GPUTarget(*TARGET)
    backend = backends[backend_name].compiler(target)

    def make_ir(fn, signature: dict, constants: dict, options: dict) -> None:
        parsed = backend.parse_options(dict(options))
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        source = ASTSource(fn, signature, constants)
        source.make_ir(target, parsed, backend.get_codegen_implementation(parsed), backend.get_module_map(), context)

    (work / "_grader_probe.py").write_text(PROBE, encoding="utf-8")
    try:  # a kernel known to compile: a failure here is this Triton's, not the student's
        probe = importlib.import_module("_grader_probe")._probe
        make_ir(probe, {"X": "*fp32", "N": "i32", "BLOCK": "constexpr"}, {(2,): 16}, {"num_warps": 4})
    except Exception as exc:  # noqa: BLE001 - whatever this Triton raises, the check cannot run here
        return {"status": "skipped", "why": f"this Triton cannot compile a known-good kernel for {TARGET[0]} "
                                            f"here: {_error_text(exc)}", "problems": [], "launches": 0}
    # The contract's launchers use torch only when called; this child calls only specialisations(), so an
    # empty stand-in spares torch's import (two of the check's five seconds here).
    sys.modules.setdefault("torch", types.ModuleType("torch"))
    contract = importlib.import_module(request["module"])
    kernels = importlib.import_module(Path(request["filename"]).stem)
    specialisations = getattr(contract, "specialisations", None)
    if specialisations is None:
        return {"status": "skipped", "why": "the contract names no launches (no specialisations())",
                "problems": [], "launches": 0}
    import ast

    def_lines = {node.name: node.lineno for node in ast.parse(request["source"]).body
                 if isinstance(node, ast.FunctionDef)}
    problems: dict[str, dict] = {}
    launches = 0
    for kernel, arguments, constexprs, options in specialisations():
        fn = getattr(kernels, kernel, None)
        if fn is None or not hasattr(fn, "arg_names") or kernel in problems:
            continue  # a kernel the file lacks is reported by the tests; one failure per kernel
        names = list(fn.arg_names)
        signature = {name: "constexpr" for name in names}
        for name, kind in zip(names, arguments, strict=False):  # the rest are constexprs
            signature[name] = kind
        constants = {(names.index(k),): v for k, v in constexprs.items() if k in names}
        launches += 1
        try:
            make_ir(fn, signature, constants, options)
        except Exception as exc:  # noqa: BLE001 - Triton's refusal, whatever its class, is the finding
            shape = ", ".join(f"{k}={v}" for k, v in constexprs.items())
            problems[kernel] = {"kernel": kernel, "line": _error_line(exc, def_lines.get(kernel, 1)),
                                "text": f"Triton cannot compile {kernel} for a GPU ({shape}; the interpreter "
                                        f"runs what a GPU refuses): {_error_text(exc)}"}
    return {"status": "failed" if problems else "compiled", "problems": list(problems.values()),
            "launches": launches}


def main() -> None:  # pragma: no cover - the child's entry point
    request = json.loads(sys.stdin.read())
    result = _compile_all(request)
    sys.stdout.write("\n" + json.dumps(result) + "\n")


if __name__ == "__main__":  # pragma: no cover
    main()

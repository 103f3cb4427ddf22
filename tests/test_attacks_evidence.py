"""Attacks on the evidence that decides points, each at every sandbox level (bubblewrap, and the
no-namespace stack forced with GRADE_NO_BWRAP=1):

* work done where the run-time recorder is not: another thread (ThreadPoolExecutor, threading,
  _thread), another process (multiprocessing, os.fork) — a CPU worker may start neither;
* softmax reached through routes no name table lists (torch.distributions, gumbel_softmax with
  its noise cancelled, torch.ops.aten): torch's dispatcher sees the same operation;
* channels between students: System V shared memory and message queues, POSIX message queues,
  in a batch of two graded side by side; nothing may be left behind;
* kernel tasks (assignment 3): a trivial kernel beside torch host code, host code that overwrites
  the kernel's result, a kernel body that calls Python: points come only from the kernel the
  grader launches itself.

Each attack asserts the exact record it gets, and that the course copy, the gradebook's other
records and the host are untouched (grading runs in temporary copies of the course only).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from grader.core.course import Course
from grader.storage.gradebook import Gradebook
from tests.conftest import ROOT, assignment_of, copy_course, grade_workspace
from tests.test_attacks import ANSWERS, Classroom, attacker_processes, tree_digest

pytestmark = [pytest.mark.sandbox]

CORRECT_DOUBLE = "\ndef double(x):\n    return x * 2\n"


def normalize_attack(body: str) -> str:
    return "import os, sys, time, ctypes\nimport torch\nimport torch.nn.functional as F\n" + body + CORRECT_DOUBLE


# attack → (its `normalize`, the static finding groups, (kind, words) of its first outcome)
NORMALIZE_ATTACKS = {
    "thread_pool": ('''
from concurrent.futures import ThreadPoolExecutor

def normalize(x):
    with ThreadPoolExecutor(2) as pool:
        return pool.submit(lambda: torch.distributions.Categorical(logits=x).probs).result()
''', {"evasion"}, ("raised", "RuntimeError: can't start new thread")),
    "threading_thread": ('''
import threading

def normalize(x):
    out = []
    worker = threading.Thread(target=lambda: out.append(torch.softmax(x, -1)))
    worker.start()
    worker.join()
    return out[0]
''', {"evasion", "softmax"}, ("raised", "RuntimeError: can't start new thread")),
    "raw_thread": ('''
import _thread

def normalize(x):
    box = []
    _thread.start_new_thread(lambda: box.append(torch.distributions.Categorical(logits=x).probs), ())
    while not box:
        time.sleep(0.01)
    return box[0]
''', {"evasion"}, ("raised", "RuntimeError: can't start new thread")),
    "multiprocessing_pool": ('''
import multiprocessing

def _probs(x):
    return torch.distributions.Categorical(logits=x).probs

def normalize(x):
    with multiprocessing.get_context("fork").Pool(1) as pool:  # its lock is a file in /dev/shm
        return pool.apply(_probs, (x,))
''', {"evasion"}, ("raised", "PermissionError: [Errno 13] Permission denied")),
    "forked_child": ('''
import pickle

def normalize(x):
    read, write = os.pipe()
    if os.fork() == 0:
        os.write(write, pickle.dumps(torch.distributions.Categorical(logits=x).probs))
        os._exit(0)
    os.close(write)
    return pickle.loads(os.read(read, 1 << 20))
''', {"evasion"}, ("raised", "PermissionError: [Errno 1] Operation not permitted")),
    "categorical": ('''
def normalize(x):
    return torch.distributions.Categorical(logits=x).probs
''', set(), ("forbidden", "called a forbidden API (softmax)")),
    "gumbel_without_noise": ('''
def normalize(x):
    return F.gumbel_softmax(x * 1e6, tau=1e6)
''', {"softmax"}, ("forbidden", "called a forbidden API (softmax)")),
    "aten_softmax": ('''
def normalize(x):
    return torch.ops.aten._softmax(x, -1, False)
''', {"evasion", "softmax"}, ("forbidden", "called a forbidden API (softmax)")),
    "log_softmax_exp": ('''
def normalize(x):
    return x.log_softmax(-1).exp()
''', {"softmax"}, ("forbidden", "called a forbidden API (softmax)")),
}


@pytest.mark.parametrize("name", sorted(NORMALIZE_ATTACKS))
def test_forbidden_work_out_of_the_recorders_sight_earns_nothing(tmp_path, level: str, name: str) -> None:
    body, groups, (kind, words) = NORMALIZE_ATTACKS[name]
    room = Classroom(tmp_path)
    result = room.grade(normalize_attack(body))
    tasks = {t.task_id: t for t in result.score.tasks}
    first = next(o for o in result.outcomes if o.task == "normalize")
    assert (first.status, first.kind) == ("failed", kind), (first.kind, first.message)
    assert words in first.message, first.message
    assert {f.group for f in result.findings if f.task == "normalize"} == groups
    assert tasks["normalize"].earned == 0 and tasks["normalize"].status == "forbidden"
    assert tasks["double"].earned == tasks["double"].points and tasks["quiz"].earned == tasks["quiz"].points
    assert result.isolation_level.startswith(level)
    room.untouched()


# A task that forbids every attention shortcut: the same routes for scaled_dot_product_attention
# and for matrix products. Each `normalize` is right (a row softmax), reached another way.
EVERY_SHORTCUT = '["softmax", "sdpa", "matmul", "multihead_attention"]'
SHORTCUT_ATTACKS = {
    # softmax as attention weights: one query of 1 against the row as keys, the identity as values
    "sdpa_weights": ('''
def normalize(x):
    n = x.shape[-1]
    q = torch.ones(*x.shape[:-1], 1, 1, dtype=x.dtype)
    v = torch.eye(n, dtype=x.dtype).expand(*x.shape[:-1], n, n)
    return F.scaled_dot_product_attention(q, x.unsqueeze(-1), v, scale=1.0).squeeze(-2)
''', {"sdpa"}),
    "sdpa_private_alias": ('''
def normalize(x):
    n = x.shape[-1]
    q = torch.ones(*x.shape[:-1], 1, 1, dtype=x.dtype)
    v = torch.eye(n, dtype=x.dtype).expand(*x.shape[:-1], n, n)
    return torch._C._nn.scaled_dot_product_attention(q, x.unsqueeze(-1), v, scale=1.0).squeeze(-2)
''', {"sdpa", "evasion"}),
    # the row sums as a matrix product, by routes no name reveals
    "operator_matmul": ('''
import operator

def normalize(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / operator.matmul(e, torch.ones(x.shape[-1], 1, dtype=x.dtype))
''', {"matmul"}),
    "linear_module": ('''
def normalize(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    row_sum = torch.nn.Linear(x.shape[-1], 1, bias=False, dtype=x.dtype)
    torch.nn.init.ones_(row_sum.weight)
    with torch.no_grad():
        return e / row_sum(e)
''', set()),
    "tensordot": ('''
def normalize(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / torch.tensordot(e, torch.ones(x.shape[-1], 1, dtype=x.dtype), dims=1)
''', {"matmul"}),
    "vmapped_dot": ('''
def normalize(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    ones = torch.ones(x.shape[-1], dtype=x.dtype)
    rows = e.reshape(-1, x.shape[-1])  # (rows, n)
    sums = torch.vmap(lambda row: torch.dot(row, ones))(rows).reshape(*x.shape[:-1], 1)  # (..., 1)
    return e / sums
''', {"matmul"}),
}


@pytest.mark.parametrize("name", sorted(SHORTCUT_ATTACKS))
def test_sdpa_and_matrix_products_by_any_route_earn_nothing(tmp_path, level: str, name: str) -> None:
    body, groups = SHORTCUT_ATTACKS[name]
    room = Classroom(tmp_path)
    manifest = room.root / "assignments" / "mini" / "assignment.toml"
    text = manifest.read_text()
    assert text.count('forbidden = ["softmax"]') == 1
    manifest.write_text(text.replace('forbidden = ["softmax"]', f"forbidden = {EVERY_SHORTCUT}"))
    room.snapshot()
    result = room.grade(normalize_attack(body))
    tasks = {t.task_id: t for t in result.score.tasks}
    first = next(o for o in result.outcomes if o.task == "normalize")
    assert (first.status, first.kind) == ("failed", "forbidden"), (first.kind, first.message)
    shortcut = "sdpa" if name.startswith("sdpa") else "matmul"
    assert f"called a forbidden API ({shortcut}" in first.message, first.message
    assert {f.group for f in result.findings if f.task == "normalize"} == groups
    assert tasks["normalize"].earned == 0 and tasks["normalize"].status == "forbidden"
    assert tasks["double"].earned == tasks["double"].points and tasks["quiz"].earned == tasks["quiz"].points
    assert result.isolation_level.startswith(level)
    room.untouched()


# --------------------------------------------------------------------------------- names computed from strings
# Each `normalize` is right (a row softmax, or softmax's own implementation) and reaches it through a route
# from a string to an object or to running code, or through a module torch or Triton re-exports: the static
# check refuses the line by the allow-list (grader.intake.resolution), whatever the worker's recorder saw.
# attack → (its `normalize`, (status, kind) of its first outcome)
FIRST_PYDOC_SPARSE_SOFTMAX = ("failed", "forbidden")
FIRST_PYDOC_SWITCHES_THEN_SOFTMAX = ("passed", "")  # its recorder switched off: the static check decides
FIRST_TIMEIT_STATEMENT = ("failed", "forbidden")
FIRST_PKGUTIL_RESOLVE_NAME = ("failed", "forbidden")
FIRST_TORCH_REEXPORTED_IMPORTLIB = ("failed", "forbidden")
FIRST_REBOUND_LOCAL_MODULE = ("failed", "forbidden")
FIRST_TRITON_REEXPORTED_BUILTINS = ("failed", "forbidden")
FIRST_TYPE_HINTS_EVALUATED = ("failed", "forbidden")
# a string annotation is code typing evaluates: the check reads it as code, and finds softmax in it too
EXTRA_GROUPS = {"type_hints_evaluated": {"softmax"}}
STRING_ROUTE_ATTACKS = {
    "pydoc_sparse_softmax": ('''
import pydoc

def normalize(x):
    sparse = pydoc.locate("torch.sparse." + "soft" + "max")
    return sparse(x.to_sparse(), -1).to_dense()
''', FIRST_PYDOC_SPARSE_SOFTMAX),
    "pydoc_switches_then_softmax": ('''
import pydoc

def normalize(x):
    no_dispatch = pydoc.locate("torch._C." + "_DisableTorchDispatch")
    no_function = pydoc.locate("torch._C." + "DisableTorchFunction")
    with no_dispatch(), no_function():
        return pydoc.locate("torch.nn.functional." + "soft" + "max")(x, -1)
''', FIRST_PYDOC_SWITCHES_THEN_SOFTMAX),
    "timeit_statement": ('''
import timeit

def normalize(x):
    out = []
    timeit.timeit("out.append(t.soft" + "max(x, -1))", number=1, globals={"out": out, "t": torch, "x": x})
    return out[0]
''', FIRST_TIMEIT_STATEMENT),
    "pkgutil_resolve_name": ('''
import pkgutil

def normalize(x):
    return pkgutil.resolve_name("torch.nn.functional:" + "soft" + "max")(x, -1)
''', FIRST_PKGUTIL_RESOLVE_NAME),
    "torch_reexported_importlib": ('''
def normalize(x):
    finder = torch.importlib.import_module("py" + "doc")
    return finder.locate("torch." + "soft" + "max")(x, -1)
''', FIRST_TORCH_REEXPORTED_IMPORTLIB),
    "rebound_local_module": ('''
def normalize(x):
    m = torch
    m = m.importlib
    return m.import_module("py" + "doc").locate("torch." + "soft" + "max")(x, -1)
''', FIRST_REBOUND_LOCAL_MODULE),
    "triton_reexported_builtins": ('''
import triton.language as tl

def normalize(x):
    return tl.math.core.builtins.eval("torch." + "soft" + "max")(x, -1)
''', FIRST_TRITON_REEXPORTED_BUILTINS),
    "type_hints_evaluated": ('''
import typing

def normalize(x):
    def holder(a: "torch.soft" "max"):
        pass
    return typing.get_type_hints(holder, {"torch": torch})["a"](x, -1)
''', FIRST_TYPE_HINTS_EVALUATED),
}


def route_lines(source: str) -> set[int]:
    """The lines of `source` that reach outside the allow-list (what the finding must name)."""
    marks = ("pydoc.", "timeit.", "pkgutil.", "importlib", "m = torch", "builtins", "get_type_hints")
    return {i for i, line in enumerate(source.splitlines(), 1)
            if any(mark in line for mark in marks) and not line.startswith("import ")}


def _string_route_graded(tmp_path: Path, level: str, name: str) -> None:
    body, (status, kind) = STRING_ROUTE_ATTACKS[name]
    room = Classroom(tmp_path)
    source = normalize_attack(body)
    result = room.grade(source)
    tasks = {t.task_id: t for t in result.score.tasks}
    first = next(o for o in result.outcomes if o.task == "normalize")
    assert (first.status, first.kind) == (status, kind), (first.status, first.kind, first.message)
    findings = [f for f in result.findings if f.task == "normalize"]
    assert {f.group for f in findings} == {"evasion"} | EXTRA_GROUPS.get(name, set()), findings
    assert {f.line for f in findings if f.group == "evasion"} == route_lines(source), findings
    assert not [f for f in result.findings if f.task != "normalize"]
    assert tasks["normalize"].earned == 0 and tasks["normalize"].status == "forbidden"
    assert tasks["double"].earned == tasks["double"].points and tasks["quiz"].earned == tasks["quiz"].points
    assert result.isolation_level.startswith(level)
    room.untouched()


@pytest.mark.parametrize("name", sorted(STRING_ROUTE_ATTACKS))
def test_a_name_computed_from_a_string_earns_nothing(tmp_path, level: str, name: str) -> None:
    _string_route_graded(tmp_path, level, name)


@pytest.mark.parametrize("level", ["bubblewrap"], indirect=True)
@pytest.mark.parametrize("name", sorted(STRING_ROUTE_ATTACKS))
def test_a_name_computed_from_a_string_earns_nothing_where_bubblewrap_starts_every_worker(
        tmp_path, level: str, name: str, monkeypatch) -> None:
    monkeypatch.setenv("GRADE_NO_ZYGOTE", "1")
    _string_route_graded(tmp_path, level, name)


# --------------------------------------------------------------------------------- IPC between students
IPC_KEY = 0x6A0DE  # both students know it, as a class's cheaters would
SENDER = f'''import ctypes, os, torch

libc = ctypes.CDLL(None, use_errno=True)

def _refused(result, what):
    if result < 0:
        raise OSError(ctypes.get_errno(), what + " refused")
    return result

def double(x):
    segment = _refused(libc.shmget({IPC_KEY}, 64 << 20, 0o1666), "shmget")
    queue = _refused(libc.msgget({IPC_KEY}, 0o1666), "msgget")
    message = ctypes.create_string_buffer(b"\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00" + str(x.tolist()).encode())
    _refused(libc.msgsnd(queue, message, len(message.raw) - 8, 0), "msgsnd")
    return x * 2
'''
RECEIVER = f'''import ctypes, time, torch

libc = ctypes.CDLL(None, use_errno=True)

def double(x):
    time.sleep(1.0)  # the sender runs beside it
    queue = libc.msgget({IPC_KEY}, 0o666)
    if queue < 0:
        raise OSError(ctypes.get_errno(), "msgget refused")
    buffer = ctypes.create_string_buffer(4096)
    got = libc.msgrcv(queue, buffer, 4088, 0, 0o4000)  # IPC_NOWAIT
    if got < 0:
        raise OSError(ctypes.get_errno(), "msgrcv refused")
    raise AssertionError("received " + buffer.raw[8:8 + got].decode())
'''
POSIX_QUEUE = '''import ctypes, torch

librt = ctypes.CDLL("librt.so.1", use_errno=True)

def double(x):
    if librt.mq_open(b"/grade-attack", 0o100 | 0o2, 0o666, None) < 0:  # O_CREAT | O_RDWR
        raise OSError(ctypes.get_errno(), "mq_open refused")
    return x * 2
'''
NORMALIZE = '''
def normalize(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)
'''


def sysv_keys() -> set[str]:
    keys = set()
    for table in ("shm", "msg", "sem"):
        lines = Path(f"/proc/sysvipc/{table}").read_text().splitlines()[1:]
        keys |= {f"{table}:{line.split()[0]}" for line in lines}
    return keys


def posix_queues() -> set[str]:
    folder = Path("/dev/mqueue")
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def test_students_graded_side_by_side_share_no_ipc_and_leave_none(tmp_path, level: str) -> None:
    from grader.pipeline.batch import run_batch

    room = Classroom(tmp_path)
    before, queues = sysv_keys(), posix_queues()
    submissions = tmp_path / "class"
    for student, source in (("sender", SENDER), ("receiver", RECEIVER), ("posix", POSIX_QUEUE)):
        (submissions / student).mkdir(parents=True)
        (submissions / student / "mini.py").write_text(source + NORMALIZE)
        (submissions / student / "answers.toml").write_text(ANSWERS)
    with Gradebook(room.gradebook) as book:
        summary = run_batch(assignment_of(room.course, "mini"), submissions, book, jobs=2, write_reports=False, seed=3)
        assert summary.errors == {}
        records = {s: book.submissions("mini", s)[0].result for s in ("sender", "receiver", "posix")}
    expected = {"sender": "PermissionError: [Errno 1] shmget refused",
                "receiver": "PermissionError: [Errno 1] msgget refused",
                "posix": "PermissionError: [Errno 1] mq_open refused"}
    for student, result in records.items():
        first = next(o for o in result.outcomes if o.task == "double")
        assert (first.status, first.kind) == ("failed", "raised"), (student, first.message)
        assert expected[student] in first.message, (student, first.message)
        assert "received" not in first.message
        assert result.isolation_level.startswith(level)
        normalize = next(t for t in result.score.tasks if t.task_id == "normalize")
        assert normalize.status == "forbidden"  # ctypes at import time: code the grader cannot check
        assert {f.group for f in result.findings if f.task == "normalize"} == {"evasion"}
    assert sysv_keys() == before and posix_queues() == queues
    with Gradebook(room.gradebook) as book:  # the other student's record is as it was
        assert repr(book.submissions("mini", "victim")[0].result.to_dict()) == room.victim
    assert tree_digest(room.root, skip=room.gradebook_files) == room.digest
    assert not attacker_processes(None)


def test_ipc_objects_are_swept_where_seccomp_is_missing(monkeypatch, level: str) -> None:
    """A host without seccomp lets a worker create IPC objects; they go with the worker."""
    from grader.sandbox.client import Sandbox

    if level == "bubblewrap":
        pytest.skip("under bubblewrap the worker's IPC namespace ends with it")
    monkeypatch.setenv("GRADE_SANDBOX_WITHOUT", "seccomp")
    before = sysv_keys()
    with Sandbox({"mini.py": (SENDER + NORMALIZE).encode()}, ["mini.py"]) as box:
        import torch

        result = box.call("double", (torch.ones(2),))
        assert result.status == "ok", result.error
        assert sysv_keys() - before  # made, while the worker lives
        if box._slot is None:
            pytest.skip("the sweep needs the worker's own uid")
    assert sysv_keys() == before


# ------------------------------------------------------------------------------ kernel tasks
FLASH_HEADER = '''import math
import torch
import triton
import triton.language as tl
'''
TORCH_ATTENTION = '''
def _torch_attention(q, k, v, causal, sm_scale):
    # attention by broadcasting: no matmul, no softmax operation
    scores = (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(-1) * sm_scale
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    weights = (scores - scores.amax(-1, keepdim=True)).exp()
    weights = weights / weights.sum(-1, keepdim=True)
    return (weights.unsqueeze(-1) * v.unsqueeze(-3)).sum(-2)
'''
TRIVIAL_KERNEL = '''
@triton.jit
def _touch(X, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(X + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)
'''


def reference_flash(replace: dict[str, str] | None = None) -> str:
    text = (ROOT / "reference" / "assignment3" / "flash.py").read_text()
    for old, new in (replace or {}).items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


KERNEL_ATTACKS = {
    # The case first seen: a trivial kernel launched twice beside torch attention in a thread pool.
    "torch_in_a_thread_beside_a_trivial_kernel": (FLASH_HEADER + TRIVIAL_KERNEL + TORCH_ATTENTION + '''
from concurrent.futures import ThreadPoolExecutor

def flash_attention(q, k, v, causal=False, sm_scale=None):
    scratch = torch.zeros(16)
    _touch[(1,)](scratch, 16, BLOCK=16)
    _touch[(1,)](scratch, 16, BLOCK=16)
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_torch_attention, q, k, v, causal, scale).result().to(q.dtype)
''', {"flash_forward": 0, "flash_launcher": 0, "flash_gqa": 0, "flash_backward": 0},
        {"flash_forward": "not_implemented", "flash_launcher": "raised"}),
    # A right kernel whose result the host code overwrites: the kernel keeps its points.
    "result_overwritten_after_the_kernel": (reference_flash({
        "    return _FlashAttention.apply(q, k, v, bool(causal), sm_scale)\n":
        "    out = _FlashAttention.apply(q, k, v, bool(causal), sm_scale)\n"
        "    return _torch_attention(q, k, v, bool(causal), sm_scale).to(q.dtype)\n"}) + TORCH_ATTENTION,
        {"flash_forward": 30, "flash_launcher": 0, "flash_gqa": 5, "flash_backward": 10},
        {"flash_launcher": "wrong"}),
    # A kernel whose body calls a Python function: in the interpreter it would run, with torch.
    "kernel_body_calls_python": (reference_flash({
        "    empty = l_i == 0.0  # only possible for rows that see no key at all\n":
        "    empty = l_i == 0.0  # only possible for rows that see no key at all\n"
        "    acc = _python_help(acc)\n"}) + '''

def _python_help(acc):
    return acc
''', {"flash_forward": 0, "flash_gqa": 0}, {}),
    # A kernel body that reaches the interpreter's numpy array behind a tensor.
    "kernel_body_reads_the_interpreters_array": (reference_flash({
        "    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_Q, other=0.0)  # [BLOCK_M, HEAD_DIM]\n":
        "    q = tl.load(q_ptrs, mask=offs_m[:, None] < N_Q, other=0.0)  # [BLOCK_M, HEAD_DIM]\n"
        "    peek = Q.handle\n"}),
        {"flash_forward": 0, "flash_gqa": 0}, {}),
}
# Kernels that reach Python through what triton.language re-exports, each inserted as the forward
# kernel's first line: in the interpreter each would run (the payload walks up to the launcher's
# frame and writes torch attention into its NaN-filled output). Each resolves to something other
# than Triton's: a kernel_code finding naming it, and no point for any task of the forward kernel.
FRAME_WALK = ("import inspect, torch\\n"
              "f = inspect.currentframe()\\n"
              "while f is not None and 'out' not in f.f_locals: f = f.f_back\\n"
              "q, k, v, out = (f.f_locals[n] for n in ('q', 'k', 'v', 'out'))\\n"
              "out.copy_(torch.softmax(q.float() @ k.float().transpose(-1, -2) / q.shape[-1] ** 0.5, -1)"
              " @ v.float())")
FIRST_LINE = '    """BLOCK_M output rows of one (batch, head); LSE[b, h, i] = m_i + log2(l_i) for the backward."""\n'
REACHING_PYTHON = {  # attack → (the line inserted in the forward kernel, what the finding names)
    "kernel_body_execs_through_tl_math_core": (f'    tl.math.core.builtins.exec("{FRAME_WALK}")\n',
                                               "the module triton.language.core"),
    "kernel_body_walks_frames_through_tl_math_core": (
        "    frame = tl.math.core.inspect.currentframe().f_back\n", "the module triton.language.core"),
    "kernel_body_resolves_through_tl_extra_pkgutil": (
        f'    tl.extra.pkgutil.resolve_name("builtins:exec")("{FRAME_WALK}")\n', "the module pkgutil"),
    "kernel_body_execs_at_compile_time": (f'    exec("{FRAME_WALK}")\n', "exec, a Python builtin"),
    "kernel_body_calls_getattr": ('    getattr(tl, "lo" + "ad")(Q)\n', "getattr, a Python builtin"),
}
for _name, (_line, _words) in REACHING_PYTHON.items():
    KERNEL_ATTACKS[_name] = (reference_flash({FIRST_LINE: FIRST_LINE + _line}),
                             {"flash_forward": 0, "flash_gqa": 0}, {})
# a module constant rebinds tl to triton.language.core (which has every tl.* the kernels use, and builtins)
KERNEL_ATTACKS["kernel_body_uses_tl_rebound_by_a_constant"] = (reference_flash({
    "BLOCK_M = 64  # query rows per program (the stub's default)\n":
    "tl = tl.math.core\nBLOCK_M = 64  # query rows per program (the stub's default)\n",
    FIRST_LINE: FIRST_LINE + f'    tl.builtins.exec("{FRAME_WALK}")\n'}),
    {"flash_forward": 0, "flash_gqa": 0, "flash_backward": 0}, {})
FINDING_WORDS = {name: words for name, (_line, words) in REACHING_PYTHON.items()}
FINDING_WORDS["kernel_body_uses_tl_rebound_by_a_constant"] = "binds again"


@pytest.fixture
def course_copy(tmp_path) -> Course:
    """A private copy of the real course (assignment 3 and the instructor's kernels)."""
    return Course(copy_course(tmp_path / "course", ("assignments", "reference", "course_kernels")))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KERNEL_ATTACKS))
def test_kernel_tasks_earn_only_what_the_grader_launched(tmp_path, course_copy: Course, level: str,
                                                         name: str) -> None:
    source, points, kinds = KERNEL_ATTACKS[name]
    digest = tree_digest(course_copy.root)
    work = tmp_path / "attacker"
    work.mkdir()
    shutil.copy(ROOT / "reference" / "assignment3" / "efficient.py", work / "efficient.py")
    (work / "flash.py").write_text(source)
    started = time.monotonic()
    result = grade_workspace(course_copy, "assignment3", work, student="attacker", seed=7, timing_device="cpu")
    elapsed = time.monotonic() - started
    earned = {t.task_id: t.earned for t in result.score.tasks}
    assert {task: earned[task] for task in points} == points, earned
    for task, kind in kinds.items():
        first = next(o for o in result.outcomes if o.task == task and o.status == "failed")
        assert first.kind == kind, (task, first.kind, first.message)
    if name.startswith("kernel_body"):
        findings = {(f.task, f.group) for f in result.findings}
        assert ("flash_forward", "kernel_code") in findings and ("flash_gqa", "kernel_code") in findings
        assert ("flash_speed", "kernel_code") in findings
        speed_outcomes = [o for o in result.outcomes if o.task == "flash_speed"]  # never timed: it cannot earn
        assert speed_outcomes and all("timing" not in o.detail for o in speed_outcomes), speed_outcomes
        assert all(o.status == "failed" or o.message.startswith("not timed: a finding of the static check")
                   for o in speed_outcomes), speed_outcomes
    if name in FINDING_WORDS:  # the finding names what the kernel reached, and nothing ran
        kernel_findings = [f for f in result.findings if f.task == "flash_forward"]
        assert kernel_findings and all(f.group == "kernel_code" for f in kernel_findings), kernel_findings
        assert any(f.function == "_flash_fwd_kernel" and FINDING_WORDS[name] in f.code for f in kernel_findings)
        assert earned["flash_speed"] == 0 and earned["flash_launcher"] == 0
    speed = [o for o in result.outcomes if o.task == "flash_speed"]
    if points["flash_forward"] == 0:  # the timed kernel is the student's, launched by the grader
        assert earned["flash_speed"] == 0
    assert all(o.detail.get("timing", {}).get("cpu_timed", True) for o in speed)
    assert result.isolation_level.startswith(level)
    assert earned["gqa"] == 15 and earned["sliding_window"] == 15  # efficient.py is the reference's
    assert tree_digest(course_copy.root) == digest
    assert not attacker_processes(None)
    assert elapsed < 600


# Where bubblewrap starts every worker (a GPU host's path) the kernel worker is started from scratch: one
# attack that the static check refuses (its payload still runs in the interpreter, as every zeroed task's
# tests run) and one that only launching the kernel into the grader's buffers defeats. The other kernels
# that reach Python differ only in what the trusted side's static check resolves, which is the same
# however the worker starts; they run at both levels above.
KERNEL_ATTACKS_WITHOUT_TEMPLATE = ("kernel_body_execs_through_tl_math_core",
                                   "torch_in_a_thread_beside_a_trivial_kernel")


@pytest.mark.slow
@pytest.mark.parametrize("level", ["bubblewrap"], indirect=True)
@pytest.mark.parametrize("name", KERNEL_ATTACKS_WITHOUT_TEMPLATE)
def test_kernel_attacks_where_bubblewrap_starts_every_worker(tmp_path, course_copy: Course, level: str,
                                                             name: str, monkeypatch) -> None:
    """Kernel attacks with a bubblewrap sandbox started for every worker (no template)."""
    monkeypatch.setenv("GRADE_NO_ZYGOTE", "1")
    test_kernel_tasks_earn_only_what_the_grader_launched(tmp_path, course_copy, level, name)

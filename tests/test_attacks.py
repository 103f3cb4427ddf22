"""Hostile submissions, each graded at every sandbox level: bubblewrap, and the
no-namespace stack (`GRADE_NO_BWRAP=1`, as in Docker or on Gradescope).

Every attack is a `mini.py` for the tiny course (tests/fixtures/mini_course),
graded in a temporary copy of the course whose gradebook already holds another
student's record. Its `double` attacks; its `normalize` is correct. Each case
asserts the exact record of `double` (kind and message), that `normalize` and
the quiz keep full marks (the worker is restarted after a fault), and that the
course tree, the other student's record and the host are untouched: no file
outside the worker's folder, no process left behind.

A level that lacks one of its layers here is skipped with the reason, since
the exact records below depend on every layer being up.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from grader.core.assignment import Assignment
from grader.core.course import Course
from grader.core.records import PASSED, TestOutcome
from grader.core.scoring import score
from grader.pipeline.grading import GradeRequest, grade, open_submission
from grader.sandbox.uids import DEFAULT_UID_RANGE
from grader.storage.gradebook import Gradebook
from tests.conftest import (
    HANGING_CALL_TIMEOUT_S,
    MINI_COURSE,
    copy_mini_course,
    grade_workspace,
    sandbox_start_s,
    shorten_call_timeout,
)

CORRECT_NORMALIZE = '''
def normalize(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)
'''
PLAIN_DOUBLE = "import torch\n\n\ndef double(x):\n    return x * 2\n"
ANSWERS = "row_sum = 1\nratio = 1.43\n"
DAEMON_NAME = "gradeattackd"  # what a surviving attacker process would be called in /proc/<pid>/comm


def tree_digest(root: Path, skip: set[Path] = frozenset()) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path in skip:
            continue
        info = path.lstat()
        digest.update(f"{path.relative_to(root)}\0{info.st_mode}\0".encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def nested_here() -> bool:
    """Whether bubblewrap's workers fork from a template here (namespaces nest inside bubblewrap)."""
    from grader.sandbox.isolation import nested_namespaces

    return not nested_namespaces(DEFAULT_UID_RANGE[0] if os.geteuid() == 0 else None)


def template_processes() -> set[int]:
    """This process's template workers' own processes (under bubblewrap a template runs as the uid
    its workers get, for the life of the process): not something an attack left."""
    from grader.sandbox.template import Zygote

    return {pid for zygote in Zygote._running.values() for pid in zygote.own_pids()}


def attacker_processes(uid: int | None) -> list[int]:
    """Live processes left by an attack: named like the attacker's, or running as its worker's uid
    (the template that uid may belong to aside)."""
    found = []
    templates = template_processes()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            comm = Path(f"/proc/{entry.name}/comm").read_text().strip()
            status = dict(line.split(":", 1) for line in Path(f"/proc/{entry.name}/status").read_text().splitlines()
                          if ":" in line)
        except OSError:
            continue
        if status.get("State", "").strip().startswith("Z"):
            continue  # a zombie waiting for init to reap it can do nothing
        if int(entry.name) in templates:
            continue
        if comm.startswith("gradeattack") or int(status["Uid"].split()[0]) == uid:
            found.append(int(entry.name))
    return found


class Classroom:
    """A temporary course with a gradebook that already holds another student's record."""

    def __init__(self, root: Path):
        self.root = root / "course"
        copy_mini_course(self.root)
        self.course = Course(self.root)
        self.gradebook = self.root / ".grade" / "gradebook.sqlite"
        self.victim = self._victim_record()
        self.snapshot()

    def _victim_record(self) -> str:
        from grader.core.manifest import load_manifest
        from grader.core.records import GradeResult
        from grader.intake.submission import Submission

        manifest = load_manifest(self.root / "assignments" / "mini" / "assignment.toml")
        outcomes = [TestOutcome(name="test_double::test_double_matrix", task="double", status=PASSED, fraction=1.0)]
        result = GradeResult(assignment_id="mini", assignment_title=manifest.title, student="victim", mode="submit",
                             score=score(manifest, outcomes), outcomes=tuple(outcomes), findings=(),
                             submission_sha256="v" * 64, submission_form="folder", submitted_at=None,
                             graded_at="2026-12-01T10:00:00+00:00", seed=1, isolation="bubblewrap",
                             isolation_level="bubblewrap", duration_s=1.0)
        with Gradebook(self.gradebook) as book:
            book.record(result, Submission(files={"mini.py": b"# victim's work\n"}, source="victim", form="folder",
                                           student="victim"))
            return book.submissions("mini", "victim")[0].result.to_dict().__repr__()

    def grade(self, source: str, student: str = "attacker", answers: str = ANSWERS):
        work = self.root.parent / student
        work.mkdir()
        (work / "mini.py").write_text(source)
        (work / "answers.toml").write_text(answers)
        assignment = Assignment.load(self.course, "mini")
        submission = open_submission(assignment, work, student=student)
        result = grade(assignment, submission, GradeRequest(protected=(str(self.gradebook),)))
        self.result = result
        used = re.search(r"\buid (\d+)", result.isolation)
        self.worker_uid = int(used.group(1)) if used else None
        with Gradebook(self.gradebook) as book:
            book.record(result, submission)
        return result

    def shorten_call_timeout(self) -> None:
        """For an attack that hangs by design (conftest.shorten_call_timeout)."""
        shorten_call_timeout(self.root)
        self.snapshot()

    @property
    def budget_s(self) -> float:
        """The course's budget for one submission (wall-clock, start-up included)."""
        from grader.core.manifest import load_manifest

        return load_manifest(self.root / "assignments" / "mini" / "assignment.toml").limits.submission_budget_s

    @property
    def gradebook_files(self) -> set[Path]:
        return {self.gradebook, Path(f"{self.gradebook}-wal"), Path(f"{self.gradebook}-shm")}

    def snapshot(self) -> None:
        """Remember the course tree (the gradebook aside: recording a grade is its job)."""
        self.digest = tree_digest(self.root, skip=self.gradebook_files)

    def untouched(self) -> None:
        """The course files, the gradebook's other record and the host are as before."""
        with Gradebook(self.gradebook) as book:
            assert repr(book.submissions("mini", "victim")[0].result.to_dict()) == self.victim
            assert {s["id"] for s in book.students()} <= {"victim", "attacker"}
        assert tree_digest(self.root, skip=self.gradebook_files) == self.digest
        assert not attacker_processes(self.worker_uid), "a process of the submission outlived its grading"


@pytest.fixture
def room(tmp_path, level) -> Classroom:
    return Classroom(tmp_path)


_PLAIN_GRADING_S: dict[str, float] = {}


def plain_grading_s(level: str) -> float:
    """How long grading a harmless submission takes at `level` on this machine (measured once a session)."""
    if level not in _PLAIN_GRADING_S:
        with tempfile.TemporaryDirectory() as folder:
            started = time.monotonic()
            Classroom(Path(folder)).grade(PLAIN_DOUBLE + CORRECT_NORMALIZE, student="plain")
            _PLAIN_GRADING_S[level] = time.monotonic() - started
    return _PLAIN_GRADING_S[level]


def attack(body: str) -> str:
    return "import os, sys, time, ctypes, socket, signal\nimport torch\n" + body + CORRECT_NORMALIZE


HANGING = {"half_a_reply"}  # attacks that hang by design: graded with a shorter call timeout

# attack → (its `double`, {level or "*": (kind, words in the message)})
ATTACKS = {
    "import_reference": ('''
def double(x):
    import reference.mini.mini as ref
    return ref.double(x)
''', {"*": ("raised", "ModuleNotFoundError: No module named 'reference'")}),
    "import_grader_internals": ('''
def double(x):
    from grader.storage import gradebook
    return x * 2
''', {"*": ("raised", "ModuleNotFoundError: No module named 'grader.storage'")}),
    "import_reference_kernels": ('''
def double(x):
    import course_kernels.flash_attention
    return x * 2
''', {"*": ("raised", "ModuleNotFoundError: No module named 'course_kernels'")}),
    "read_hidden_tests": ('''
def double(x):
    open("{course}/reference/mini/tests/test_double.py").read()
    return x * 2
''', {"bubblewrap": ("raised", "FileNotFoundError: [Errno 2] No such file or directory"),
      "process": ("raised", "PermissionError: [Errno 13] Permission denied")}),
    "rewrite_hidden_tests": ('''
def double(x):
    with open("{course}/reference/mini/tests/test_double.py", "w") as fh:
        fh.write("def test_nothing():\\n    pass\\n")
    return x * 2
''', {"bubblewrap": ("raised", "FileNotFoundError: [Errno 2] No such file or directory"),
      "process": ("raised", "PermissionError: [Errno 13] Permission denied")}),
    "read_quiz_key": ('''
def double(x):
    return open("{course}/reference/mini/quiz_key.toml").read()
''', {"bubblewrap": ("raised", "FileNotFoundError: [Errno 2] No such file or directory"),
      "process": ("raised", "PermissionError: [Errno 13] Permission denied")}),
    "overwrite_gradebook": ('''
def double(x):
    with open("{gradebook}", "r+b") as fh:
        fh.write(b"garbage")
    return x * 2
''', {"bubblewrap": ("raised", "FileNotFoundError: [Errno 2] No such file or directory"),
      "process": ("raised", "PermissionError: [Errno 13] Permission denied")}),
    "grader_environment": ('''
def double(x):
    return open(f"/proc/{{os.getppid()}}/environ").read()
''', {"*": ("raised", "PermissionError: [Errno 13] Permission denied")}),
    "scan_processes": ('''
def double(x):
    return os.listdir("/proc")
''', {"*": ("raised", "PermissionError: [Errno 13] Permission denied: '/proc'")}),
    "write_outside_its_folder": ('''
def double(x):
    open("/tmp/grade-attack-marker", "w").write("here")
    return x * 2
''', {"*": ("raised", "PermissionError: [Errno 13] Permission denied: '/tmp/grade-attack-marker'")}),
    "shared_memory": ('''
def double(x):
    open("/dev/shm/grade-attack-marker", "w").write("here")
    return x * 2
''', {"*": ("raised", "PermissionError: [Errno 13] Permission denied: '/dev/shm/grade-attack-marker'")}),
    "kill_the_supervisor": ('''
def double(x):
    os.kill(os.getppid(), signal.SIGKILL)
    return x * 2
''', {"*": ("raised", "PermissionError: [Errno 1] Operation not permitted")}),
    "trace_the_supervisor": ('''
def double(x):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, os.getppid(), 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace refused")
    return x * 3
''', {"*": ("raised", "PermissionError: [Errno 1] ptrace refused")}),
    "read_the_supervisors_memory": ('''
def double(x):
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(64)
    local = (ctypes.c_void_p * 2)(ctypes.cast(buffer, ctypes.c_void_p), 64)
    remote = (ctypes.c_void_p * 2)(0x400000, 64)
    if libc.syscall(310, os.getppid(), local, 1, remote, 1, 0) < 0:  # process_vm_readv
        raise OSError(ctypes.get_errno(), "process_vm_readv refused")
    return x * 3
''', {"*": ("raised", "PermissionError: [Errno 1] process_vm_readv refused")}),
    "new_user_namespace": ('''
def double(x):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare refused")
    return x * 3
''', {"*": ("raised", "PermissionError: [Errno 1] unshare refused")}),
    "become_root": ('''
def double(x):
    os.setuid(0)
    return x * 3
''', {"bubblewrap": ("raised", "OSError: [Errno 22] Invalid argument"),  # uid 0 does not exist in its namespace
      "process": ("raised", "PermissionError: [Errno 1] Operation not permitted")}),
    "loopback_network": ('''
def double(x):
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    return x * 2
''', {"*": ("raised", "PermissionError: [Errno 1] Operation not permitted")}),
    "detached_daemon": ('''
def double(x):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, b"gradeattackd", 0, 0, 0)  # PR_SET_NAME
            time.sleep(120)
        os._exit(0)
    os.wait()
    return x * 2
''', {"*": ("raised", "PermissionError: [Errno 1] Operation not permitted")}),  # a CPU worker starts no process
    "fork_bomb": ('''
def double(x):
    children = 0
    try:
        while children < 5000:
            if os.fork() == 0:
                ctypes.CDLL(None).prctl(15, b"gradeattackf", 0, 0, 0)
                time.sleep(120)
                os._exit(0)
            children += 1
    except OSError:
        pass
    return x * 2 if children == 0 else x * 3  # the first fork is refused
''', {"*": ("passed", "")}),
    "half_a_reply": ('''
import stat, struct
def double(x):
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, struct.pack(">Q", 1000) + b"x")
        except OSError:
            pass
    time.sleep(120)
''', {"*": ("timeout", f"did not finish: it did not answer within {HANGING_CALL_TIMEOUT_S} s")}),
    "tensor_claiming_terabytes": ('''
def double(x):
    return torch.zeros(1).expand(10**12)
''', {"*": ("crashed", "broke the grader's channel")}),
    "memory_bomb": ('''
def double(x):
    hoard = bytearray(16 * 2**30)
    return x * 2
''', {"*": ("raised", "MemoryError")}),
    # The course's write budget is 64 MiB (tests/fixtures/mini_course): 20 files of 60 MiB would be 1.2 GB.
    "fill_the_disk": ('''
def double(x):
    for i in range(20):
        with open(f"junk{{i}}.bin", "wb") as fh:
            fh.write(b"x" * (60 << 20))
    return x * 2
''', {"*": ("disk", "the write budget is 64 MiB for all the files it writes")}),
    "fill_the_disk_around_python": ('''
def double(x):
    libc = ctypes.CDLL(None, use_errno=True)
    block = b"x" * (4 << 20)
    for i in range(20):  # open(2) and write(2) through libc: no Python `open` to see
        fd = libc.open(f"junk{{i}}.bin".encode(), 0o1101, 0o644)  # O_WRONLY | O_CREAT | O_TRUNC
        for _ in range(15):
            libc.write(fd, block, len(block))
        libc.close(fd)
    return x * 2
''', {"*": ("disk", "the write budget is 64 MiB for all the files it writes")}),
}


class LoopbackServer:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self):
        self.running = False
        self.thread.join()
        self.sock.close()


@pytest.mark.sandbox
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_contained(room: Classroom, level: str, name: str) -> None:
    body, expected = ATTACKS[name]
    kind, words = expected.get(level, expected.get("*"))
    if name in HANGING:
        room.shorten_call_timeout()
    server = LoopbackServer()
    try:
        source = attack(body.format(course=room.root, gradebook=room.gradebook, port=server.port))
        started = time.monotonic()
        result = room.grade(source)
        elapsed = time.monotonic() - started
    finally:
        server.close()
    double = [o for o in result.outcomes if o.task == "double"]
    tasks = {t.task_id: t for t in result.score.tasks}
    if kind == "passed":
        assert all(o.status == PASSED for o in double), [o.message for o in double]
    else:
        first = double[0]
        assert (first.status, first.kind) == ("failed", kind), (first.kind, first.message)
        assert words in first.message, first.message
        assert tasks["double"].earned == 0
    if name.startswith("import_"):  # found statically as well: importing course code zeroes every task
        assert {f.group for f in result.findings} == {"course_code"}
        assert {t.status for t in tasks.values()} == {"forbidden"} and result.score.total == 0
    else:
        assert not result.findings
        assert tasks["normalize"].earned == tasks["normalize"].points, [o.message for o in result.outcomes]
        assert tasks["quiz"].earned == tasks["quiz"].points
    assert result.isolation_level.startswith(level)
    if level == "bubblewrap" and not os.environ.get("GRADE_NO_ZYGOTE") and nested_here():
        assert "nested in its slot's bubblewrap sandbox" in result.isolation  # the level's template path
    assert server.accepted == 0
    assert not Path("/tmp/grade-attack-marker").exists() and not Path("/dev/shm/grade-attack-marker").exists()
    # A submission costs at most its budget, and the trusted side's own work around it (a few times what
    # a plain grading takes on this machine now): the grader waits for nothing the attack left running.
    bound = room.budget_s + 3 * plain_grading_s(level)
    assert elapsed < bound, f"one submission cost {elapsed:.0f} s (bound {bound:.0f} s)"
    room.untouched()


@pytest.mark.sandbox
@pytest.mark.parametrize("level", ["bubblewrap"], indirect=True)
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_contained_where_bubblewrap_starts_every_worker(room: Classroom, level: str, name: str,
                                                                  monkeypatch) -> None:
    """The same attacks where bubblewrap execs each worker (a GPU worker, or a host that refuses nested
    namespaces): the level's other path, with the same records."""
    monkeypatch.setenv("GRADE_NO_ZYGOTE", "1")
    test_attack_is_contained(room, level, name)
    assert "nested in its slot's bubblewrap sandbox" not in room.result.isolation  # it was exec'd


@pytest.mark.sandbox
def test_a_sleeping_import_costs_no_more_than_the_budget(room: Classroom, level: str) -> None:
    # a budget a worker surely starts within on this machine now, far below the 600 s the import sleeps
    budget = max(8, round(4 * sandbox_start_s(level) + 4))
    manifest = room.root / "assignments" / "mini" / "assignment.toml"
    limited = re.sub(r"(submission_budget_s|call_timeout_s) = \d+", rf"\1 = {budget}", manifest.read_text())
    manifest.write_text(limited)
    room.snapshot()
    started = time.monotonic()
    result = room.grade("import time\ntime.sleep(600)\n" + CORRECT_NORMALIZE)
    elapsed = time.monotonic() - started
    assert elapsed < budget + 60, f"grading took {elapsed:.1f} s against a budget of {budget} s"
    code = [o for o in result.outcomes if o.task in ("double", "normalize")]
    assert {o.kind for o in code} <= {"timeout", "budget"} and result.score.total == 20.0  # the quiz only
    assert code[0].kind == "timeout" and "while importing your files" in code[0].message
    room.untouched()


# ----------------------------------------------------------------------------- timing
TIMING_COURSE = MINI_COURSE.parent / "timing_course"
HONEST_ATTEND = "import torch\n\ndef attend(q, k, v):\n    return torch.softmax(q @ k.T, dim=-1) @ v\n"
TIMING_ATTACKS = {  # the timed kernel → (kind of the speed test, words, speed credit)
    "honest": (HONEST_ATTEND, "passed", "the reference time", None),
    # 200 times the reference's work (CPU-bound like it, so load slows both alike) behind clocks that stand still
    "patched_clocks": ('''import time, torch
time.perf_counter = time.monotonic = time.time = lambda: 0.0

def attend(q, k, v):
    for _ in range(200):
        out = torch.softmax(q @ k.T, dim=-1) @ v
    return out
''', "passed", "the reference time", 0.0),
    "memoised_after_the_check": ('''import torch
_seen = []

def attend(q, k, v):
    if len(_seen) < 3:
        _seen.append(torch.softmax(q @ k.T, dim=-1) @ v)
    return _seen[-1]
''', "wrong", "the outputs of the timed calls do not match the reference", 0.0),
    "every_other_call_replayed": ('''import torch
_calls = [0]
_last = []

def attend(q, k, v):
    _calls[0] += 1
    if _calls[0] > 3 and _calls[0] % 2 and _last:
        return _last[0]
    _last[:] = [torch.softmax(q @ k.T, dim=-1) @ v]
    return _last[0]
''', "wrong", "the outputs of the timed calls do not match the reference", 0.0),
}


TIMING_DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs a CUDA device")])]


@pytest.mark.sandbox
@pytest.mark.parametrize("device", TIMING_DEVICES)
@pytest.mark.parametrize("name", sorted(TIMING_ATTACKS))
def test_timing_attack_earns_no_speed_credit(tmp_path, level: str, name: str, device: str) -> None:
    source, kind, words, credit = TIMING_ATTACKS[name]
    root = tmp_path / "course"
    shutil.copytree(TIMING_COURSE, root)
    digest = tree_digest(root)
    work = tmp_path / name
    work.mkdir()
    (work / "speedy.py").write_text(source)
    course = Course(root)
    result = grade_workspace(course, "speedy", work, student=name, timing_device=device)
    speed = next(o for o in result.outcomes if o.task == "attend_speed")
    tasks = {t.task_id: t for t in result.score.tasks}
    assert tasks["attend"].earned == tasks["attend"].points  # the kernel is correct when it is checked
    assert (speed.status, speed.kind or "passed") == ("failed" if kind == "wrong" else "passed", kind), speed.message
    assert words in (speed.message or speed.detail.get("detail", "")), speed.message
    assert speed.detail["timing"]["cpu_timed"] is (device == "cpu")
    if credit is None:  # an honest kernel: about as fast as the reference, by the grader's clock
        assert tasks["attend_speed"].earned > 0 and speed.detail["timing"]["verified"]
    else:
        assert tasks["attend_speed"].earned == credit
    assert tree_digest(root) == digest


# ------------------------------------------------------------------ workers side by side
NEIGHBOUR = b'''
import os, signal, threading, time

def where():
    return os.getcwd()

def poke(pid, path):
    found = []
    for action in (lambda: os.kill(pid, signal.SIGKILL), lambda: open(path).read()):
        try:
            action()
            found.append("reached")
        except OSError as exc:
            found.append(type(exc).__name__)
    return found

def beat_until_told(limit):
    """Say it beats (a file `beating` here), then note the time every 2 ms until that file is gone (at
    most `limit` s); the longest gap between two notes."""
    open("beating", "w").close()
    stamps = [time.monotonic()]
    while os.path.exists("beating") and stamps[-1] - stamps[0] < limit:
        time.sleep(0.002)
        stamps.append(time.monotonic())
    return max(b - a for a, b in zip(stamps, stamps[1:]))
'''


@pytest.mark.sandbox
def test_a_worker_cannot_touch_another_students_worker(level: str) -> None:
    from grader.sandbox import uids
    from grader.sandbox.client import Sandbox

    with Sandbox({"n.py": NEIGHBOUR}, ["n.py"]) as victim, Sandbox({"n.py": NEIGHBOUR}, ["n.py"]) as attacker:
        assert victim.call("where").status == "ok" and attacker.call("where").status == "ok"
        # At the no-namespace level a uid of its own is the victim's fence; under bubblewrap both
        # workers of this process fork from one slot's template (one uid) and each has namespaces
        # of its own: neither can name the other's process or see its files.
        assert victim._worker_pid in uids.processes_of(victim.worker_uid)
        if victim._nested is None:
            assert victim.worker_uid != attacker.worker_uid, "the victim's worker runs as a uid of its own"
        else:
            assert victim.worker_uid == attacker.worker_uid and victim._nested is attacker._nested
        victim_file = os.path.join(victim._root, f"work{victim.restarts}", "n.py")
        result = attacker.call("poke", (victim._worker_pid, victim_file))
        assert result.status == "ok"
        expected = (["ProcessLookupError", "FileNotFoundError"] if level == "bubblewrap"  # not in its namespaces
                    else ["PermissionError", "PermissionError"])
        assert result.value == expected
        assert victim.call("where").status == "ok"  # still alive and answering


@pytest.mark.sandbox
def test_the_worker_is_stopped_while_the_reference_is_timed(level: str) -> None:
    from grader.harness.runners import SandboxRunner
    from grader.sandbox import protocol
    from grader.sandbox.client import Sandbox

    with Sandbox({"n.py": NEIGHBOUR}, ["n.py"]) as box:
        runner = SandboxRunner(box)
        assert box.call("where").status == "ok"
        work = Path(box._root) / f"work{box.restarts}"
        if box.base == "bubblewrap":  # its folder is a tmpfs in its own mount namespace: seen from outside
            from grader.sandbox.isolation import WORKDIR_MOUNT

            work = Path(f"/proc/{box._worker_pid}/root{WORKDIR_MOUNT}")
        # The call is sent and left running (a worker runs one call at a time and starts no thread):
        # once it beats, the trusted side freezes the worker as it does around the reference's block,
        # then tells it to stop. Waiting for each step (not for a fixed time) keeps a busy machine's
        # verdict the same: load only widens the gaps, never hides the frozen one.
        protocol.write_message(box._req_w, {"op": "call", "name": "beat_until_told", "args": [600], "kwargs": {}},
                               time.monotonic() + 600)
        deadline = time.monotonic() + 600
        while not (work / "beating").exists():
            assert time.monotonic() < deadline, "the worker never started beating"
            time.sleep(0.05)
        with runner.frozen():
            time.sleep(0.5)  # what the reference's block would take
        (work / "beating").unlink()  # removed, not a file made: under bubblewrap the grader's uid has no
        # name in the worker's user namespace, so it can make no file there
        state, reply = box._read(time.monotonic() + 600)
        assert state == "ok" and reply["ok"], reply
        assert reply["value"] >= 0.45  # it did not run meanwhile


@pytest.mark.slow
def test_a_regular_install_ships_no_instructor_kernels(tmp_path) -> None:
    """`pip install .` must not put course_kernels/ (the reference FlashAttention) where a worker imports from.

    Built from a copy of the checkout in tmp_path: setuptools writes build/ and *.egg-info beside the
    project it builds, and no test writes into the checkout."""
    import shutil
    import subprocess
    import sys
    import zipfile

    from tests.conftest import ROOT

    source = tmp_path / "source"
    skipped = shutil.ignore_patterns(".*", "__pycache__", "build", "*.egg-info", "node_modules")
    shutil.copytree(ROOT, source, ignore=lambda folder, names: set(skipped(folder, names)) | (
        {"tests", "docs", "benchmarks"} & set(names) if Path(folder) == ROOT else set()))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "wheel"), str(source)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    assert (source / "course_kernels").is_dir()  # the copy holds the kernels: the wheel must leave them out
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert "course_kernels" not in tops and "reference" not in tops and "grader" in tops


LIAR = b'''
import resource, torch

class _Nothing:
    ru_maxrss = 0

resource.getrusage = lambda who: _Nothing()  # what the worker's own memory report would read

def hog(n):
    block = torch.ones(n, n)  # n*n*4 bytes
    return float(block[0, 0])
'''


@pytest.mark.sandbox
def test_peak_memory_is_measured_from_outside_the_worker(level: str) -> None:
    from grader.sandbox.client import Sandbox

    with Sandbox({"liar.py": LIAR}, ["liar.py"]) as box:
        result = box.call("hog", (8192,), track_tensors=True)
        assert result.status == "ok" and result.facts.memory_measured_by == "grader"
        assert result.facts.peak_memory_bytes >= 8192 * 8192 * 4 * 0.95  # 256 MiB, whatever the worker says


POISONER = b'''
import torch, grader.sandbox.worker as worker_module

torch.ones = lambda *args, **kwargs: torch.zeros(*args, **kwargs)  # for every later student, it hopes
worker_module._plain = lambda value, path="value": "poisoned"

def ones(n):
    return torch.ones(n)

def write_into_the_runtime():
    with open(worker_module.__file__, "a") as fh:
        fh.write("\\n_plain = None\\n")
'''
CLEAN = b'''
import torch

def ones(n):
    return torch.ones(n)
'''


@pytest.mark.sandbox
def test_one_student_cannot_poison_the_next_worker(level: str) -> None:
    """Workers at the no-namespace level fork from one template that imported torch: what a student
    changes in its worker stays in its own process, and the template's files are read-only."""
    import torch

    from grader.sandbox.client import Sandbox

    with Sandbox({"p.py": POISONER}, ["p.py"]) as first:
        assert first.call("ones", (3,)).value == "poisoned"  # it did poison its own worker...
        written = first.call("write_into_the_runtime")
        assert (written.status, written.error.get("type")) == ("raised", "PermissionError")
    with Sandbox({"c.py": CLEAN}, ["c.py"]) as second:  # ...and the next student's worker is untouched
        result = second.call("ones", (3,))
        assert result.status == "ok" and torch.equal(result.value, torch.ones(3))


FILLER = b'''
import ctypes


def python_files(n, mib):
    for i in range(n):
        with open(f"py{i}.bin", "wb") as fh:
            fh.write(b"x" * (mib << 20))


def libc_files(n, mib):
    libc = ctypes.CDLL(None, use_errno=True)
    block = b"x" * (1 << 20)
    for i in range(n):
        fd = libc.open(f"c{i}.bin".encode(), 0o1101, 0o644)  # O_WRONLY | O_CREAT | O_TRUNC
        for _ in range(mib):
            libc.write(fd, block, len(block))
        libc.close(fd)


def one():
    return 1
'''
AT_IMPORT = b"for i in range(20):\n    open(f'i{i}.bin', 'wb').write(b'x' * (4 << 20))\n\n\ndef one():\n    return 1\n"


class DiskWatch:
    """The most the host's disk held, sampled, in the sandbox's worker folders (work0, work1...)."""

    def __init__(self, root: str):
        from grader.sandbox.limits import folder_bytes

        self.root, self.most, self.running = root, 0, True

        def watch() -> None:
            while self.running:
                for name in os.listdir(self.root):
                    if name.startswith("work"):
                        self.most = max(self.most, folder_bytes(os.path.join(self.root, name)))
                time.sleep(0.001)

        self.thread = threading.Thread(target=watch, daemon=True)
        self.thread.start()

    def stop(self) -> int:
        self.running = False
        self.thread.join()
        return self.most


@pytest.mark.sandbox
@pytest.mark.parametrize("start", ["template", "exec"])
def test_nothing_is_written_past_the_write_budget(level: str, start: str, monkeypatch) -> None:
    """A worker that writes 80 MiB against a budget of 16 MiB, through Python's open, through libc, and
    at import: the call's record is kind disk with the folder's size as data, the worker ends, and the
    disk never held more than the budget (under bubblewrap nothing at all reaches the host's disk: the
    folder is a tmpfs; at the no-namespace level Python's open is measured before every file, so the
    overshoot is one file at most, the per-file limit)."""
    from grader.sandbox.client import Sandbox
    from grader.sandbox.limits import BLOCK, SandboxLimits

    if start == "exec":
        monkeypatch.setenv("GRADE_NO_ZYGOTE", "1")
    limits = SandboxLimits(write_budget_mb=16, file_size_mb=4)
    budget, one_file = 16 << 20, 4 << 20
    # What the folder held, as grader.sandbox.limits.folder_bytes counts it: each of its entries (at most
    # 20 files and a few folders here) a block at least, which a tmpfs does not charge for a folder or an
    # empty file; at the no-namespace level one file more at most.
    bound = budget + 32 * BLOCK + (0 if level == "bubblewrap" else one_file)
    host_bound = 64 * BLOCK if level == "bubblewrap" else bound  # the submission's own files, on the host
    with Sandbox({"filler.py": FILLER}, ["filler.py"], limits=limits, use_gpu=False) as box:
        held = {}
        for route in ("python_files", "libc_files"):
            watch = DiskWatch(box._root)
            try:
                result = box.call(route, (20, 4))
            finally:
                held[route] = watch.stop()
            assert result.status == "disk", (route, result.status, result.detail)
            assert result.error["budget_bytes"] == budget
            assert "the write budget is 16 MiB for all the files it writes" in result.detail
            if route == "python_files" or level == "bubblewrap":  # around Python, only the tmpfs holds it
                assert budget - 8 * BLOCK <= result.error["held_bytes"] <= bound, (route, result.error)
                assert held[route] <= host_bound, f"the host's disk held {held[route]} bytes of the worker's"
        after = box.call("one")
        assert after.status == "ok" and after.value == 1  # a fresh worker, in a fresh folder
        assert sorted(n for n in os.listdir(box._root) if n.startswith("work")) == ["work2"]  # the others are gone
    with Sandbox({"at_import.py": AT_IMPORT}, ["at_import.py"], limits=limits, use_gpu=False) as box:
        watch = DiskWatch(box._root)
        try:
            result = box.call("one")
        finally:
            most = watch.stop()
        assert result.status == "disk", (result.status, result.detail)
        assert budget - 8 * BLOCK <= result.error["held_bytes"] <= bound
        assert most <= host_bound, f"the host's disk held {most} bytes of the worker's"


@pytest.mark.sandbox
def test_filling_the_disk_at_import_costs_every_code_task(room: Classroom, level: str) -> None:
    """The attack that was seen (20 files of 60 MiB written at import): every call of every code task is
    recorded as kind disk, the quiz keeps its points, nothing else is touched."""
    source = "for i in range(20):\n    open(f'junk{i}.bin', 'wb').write(b'x' * (60 << 20))\n\n" + PLAIN_DOUBLE \
        + CORRECT_NORMALIZE
    result = room.grade(source)
    code = [o for o in result.outcomes if o.task in ("double", "normalize")]
    assert code and {(o.status, o.kind) for o in code} == {("failed", "disk")}, [(o.kind, o.message) for o in code]
    assert all("the write budget is 64 MiB for all the files it writes" in o.message for o in code)
    assert sum("not run again" not in o.message for o in code) == 1  # one worker filled it; no test ran again
    assert code[0].problem["at_import"] and code[0].problem["held_bytes"] >= code[0].problem["budget_bytes"] - (1 << 15)
    tasks = {t.task_id: t for t in result.score.tasks}
    assert tasks["double"].earned == tasks["normalize"].earned == 0
    assert tasks["quiz"].earned == tasks["quiz"].points
    # the static check refuses a file opened where a task has a forbidden list (normalize's): a second line
    assert [(f.task, f.group, f.line) for f in result.findings] == [("normalize", "evasion", 2)]
    room.untouched()

"""The worker protocol and the sandbox, directly (no pytest suite in between)."""

from __future__ import annotations

import ast
import contextlib
import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from grader.sandbox import isolation, protocol
from grader.sandbox.client import Sandbox
from grader.sandbox.limits import SandboxLimits
from grader.sandbox.worker_status import ns_pids, wait_gone
from tests.conftest import ROOT

SOURCE = b'''
import os
import torch

def add(a, b=1):
    return a + b

def pair(x):
    return x, {"n": x.numel(), "dtype": x.dtype}

def boom():
    raise ValueError("bad value")

def listdir(path):
    return sorted(os.listdir(path))

def env():
    return dict(os.environ)

def network():
    import socket
    socket.create_connection(("127.0.0.1", 9), timeout=1)

def chatty():
    print("hello from the student")
    return 1

def subclass(x):
    class Sneaky(torch.Tensor):
        pass
    return x.as_subclass(Sneaky)
'''


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox({"m.py": SOURCE}, ["m.py"], limits=SandboxLimits(call_timeout_s=20)) as box:
        yield box


@pytest.mark.sandbox
def test_round_trip_of_values(sandbox):
    x = torch.arange(6.0).reshape(2, 3)
    result = sandbox.call("add", (x,), {"b": torch.ones(3)})
    assert result.status == "ok"
    torch.testing.assert_close(result.value, x + 1)
    result = sandbox.call("pair", (x,))
    assert result.value[1] == {"n": 6, "dtype": torch.float32}


@pytest.mark.sandbox
def test_exception_summary_has_only_student_frames(sandbox):
    result = sandbox.call("boom")
    assert result.status == "raised"
    assert result.error["type"] == "ValueError" and result.error["message"] == "bad value"
    assert all(frame.startswith("m.py") for frame in result.error["frames"])


@pytest.mark.sandbox
def test_missing_function(sandbox):
    assert sandbox.call("nope").status == "missing"


@pytest.mark.sandbox
def test_captured_output_per_call(sandbox):
    result = sandbox.call("chatty")
    assert "hello from the student" in result.output


@pytest.mark.sandbox
def test_tensor_subclass_comes_back_plain(sandbox):
    result = sandbox.call("subclass", (torch.ones(2),))
    assert result.status == "ok" and type(result.value) is torch.Tensor


@pytest.mark.sandbox
def test_environment_is_scrubbed(sandbox, monkeypatch):
    result = sandbox.call("env")
    assert result.status == "ok"
    assert set(result.value) <= {"PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE",
                                 "PYTHONHASHSEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                 "TRITON_CACHE_DIR", "TRITON_INTERPRET", "CUDA_VISIBLE_DEVICES", "TMPDIR",
                                 "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "PWD", "LC_CTYPE"}


@pytest.mark.sandbox
@pytest.mark.skipif(not isolation.bwrap_works(), reason="bubblewrap cannot create namespaces here")
def test_bubblewrap_hides_the_course_and_the_network(sandbox):
    assert sandbox.base == "bubblewrap" and sandbox.isolation.level.startswith("bubblewrap")
    listing = sandbox.call("listdir", (isolation.WORKDIR_MOUNT,))  # its own folder, nothing else
    assert listing.status == "ok" and "m.py" in listing.value
    assert sandbox.call("listdir", ("/",)).status == "raised"
    course_root = ROOT
    assert sandbox.call("listdir", (str(course_root / "reference"),)).status == "raised"
    assert sandbox.call("listdir", (str(course_root / "tests"),)).status == "raised"
    assert sandbox.call("network").status == "raised"


@pytest.mark.sandbox
def test_process_fallback_runs_when_bubblewrap_is_off():
    with Sandbox({"m.py": SOURCE}, ["m.py"], isolation_level="process") as box:
        assert box.isolation.level.startswith("process")
        assert box.call("add", (torch.ones(1),)).status == "ok"


def test_budget_is_enforced():
    with Sandbox({"m.py": SOURCE}, ["m.py"], limits=SandboxLimits(submission_budget_s=0.0)) as box:
        result = box.call("add", (torch.ones(1),))
        assert result.status == "budget" and "budget" in result.detail


def test_protocol_refuses_code_in_messages():
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    payload = pickle.dumps(Evil(), protocol=2)
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(payload)


def test_protocol_round_trip_over_a_pipe():
    read_fd, write_fd = os.pipe()
    message = {"op": "call", "args": [torch.ones(3)], "kwargs": {"k": 2}}
    protocol.write_message(write_fd, message)
    os.close(write_fd)
    received = protocol.read_message(read_fd)
    assert received["kwargs"] == {"k": 2} and torch.equal(received["args"][0], torch.ones(3))
    with pytest.raises(protocol.ChannelClosed):
        protocol.read_message(read_fd)
    os.close(read_fd)


def test_the_runtime_copy_holds_everything_the_worker_imports_and_nothing_else():
    """The worker's sys.path has only the runtime copy of the grader: every grader module the
    supervisor and worker import (transitively) must be in it, and nothing else of the grader."""
    import ast

    package = ROOT / "grader" / "sandbox"
    wanted, frontier = {"__init__.py"}, ["supervisor.py", "worker.py"]
    while frontier:
        name = frontier.pop()
        wanted.add(name)
        for node in ast.walk(ast.parse((package / name).read_text())):
            modules = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grader"):
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [a.name for a in node.names if a.name.startswith("grader")]
            for module in modules:
                assert module == "grader.sandbox" or module.startswith("grader.sandbox"), module
                leaf = module.removeprefix("grader.sandbox").lstrip(".").split(".")[0]
                if leaf and (package / f"{leaf}.py").is_file() and f"{leaf}.py" not in wanted:
                    frontier.append(f"{leaf}.py")
    assert wanted <= set(isolation.WORKER_MODULES), wanted - set(isolation.WORKER_MODULES)
    assert "client.py" not in isolation.WORKER_MODULES and "isolation.py" not in isolation.WORKER_MODULES


NESTED = b'''
import os

def look():
    return {"files": sorted(set(os.listdir(".")) - {"__pycache__"}), "pid": os.getpid(), "uid": os.getuid()}
'''


def _namespaces(pid: int) -> dict[str, str]:
    return {kind: os.readlink(f"/proc/{pid}/ns/{kind}") for kind in ("user", "mnt", "pid", "net", "ipc")}


def _capabilities(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return int(next(line.split()[1] for line in fh if line.startswith("CapEff:")), 16)


@pytest.mark.sandbox
def test_a_bubblewrap_worker_forks_from_its_slots_template_with_namespaces_of_its_own(monkeypatch):
    """Under bubblewrap a CPU worker forks from the slot's template (one bubblewrap sandbox) and nests
    user, mount, PID, network and IPC namespaces of its own: another from the template's, another from
    the next worker's; it holds no capability, sees only its own files and a /tmp of its own."""
    monkeypatch.delenv("GRADE_NO_BWRAP", raising=False)
    monkeypatch.delenv("GRADE_NO_ZYGOTE", raising=False)
    if not isolation.bwrap_works() or isolation.nested_namespaces(None if os.geteuid() else 60000):
        pytest.skip("bubblewrap, with namespaces nested in it, is not available here")
    seen = []
    spawned = []
    with contextlib.ExitStack() as both:  # both workers alive at once: a namespace's id is reused once it is gone
        for number in range(2):
            box = both.enter_context(Sandbox({"w.py": NESTED, f"mine{number}.txt": b""}, ["w.py"]))
            assert box.wait_ready().level.startswith("bubblewrap+") and box.uses_zygote
            looked = box.call("look")
            assert looked.status == "ok", looked
            assert looked.value["files"] == sorted(["w.py", f"mine{number}.txt", ".home", ".tmp"])
            assert looked.value["pid"] == 2  # its supervisor is pid 1 of its own PID namespace
            view = f"/proc/{box._worker_pid}/root"  # its mount namespace, seen from outside
            assert set(os.listdir(f"{view}/tmp")) == _python_under_tmp() and os.listdir(f"{view}/slots") == []
            assert sorted(set(os.listdir(f"{view}/submission")) - {"__pycache__"}) == looked.value["files"]
            template = next(p for p in box._nested.own_pids() if ns_pids(p)[1:] == ["2"])  # bubblewrap's child
            worker = _namespaces(box._worker_pid)
            assert all(worker[kind] != _namespaces(template)[kind] for kind in worker), worker
            assert _capabilities(box._worker_pid) == 0
            if box.worker_uid is not None:
                assert looked.value["uid"] == box.worker_uid == box._nested.uid
            seen.append(worker)
            spawned.append(box._supervisor_pid)  # the template's fork, which ends after all of its namespace
        assert all(seen[0][kind] != seen[1][kind] for kind in seen[0])  # the next worker's are its own
    assert all(wait_gone(pid, time.monotonic()) for pid in spawned)  # gone when the sandbox stopped, not later


def _python_under_tmp(*bound: str) -> set[str]:
    """What a worker's fresh /tmp holds: the first folder of each Python root bound below /tmp (an
    interpreter in a virtual environment there) and of each other folder in `bound`, nothing else."""
    return {Path(root).relative_to("/tmp").parts[0] for root in (*isolation.python_roots(), *bound)
            if root.startswith("/tmp/")}


RO_UNDER_TMP = r'''
import os, sys
from grader.sandbox import namespaces
open("/tmp/left-by-another", "w").write("x")
namespaces._unshare()
namespaces._fresh(("/tmp",), 1 << 20)
seen = {"tmp": sorted(os.listdir("/tmp")), "kept": open(sys.argv[1] + "/kept.txt").read()}
try:
    open(sys.argv[1] + "/new.txt", "w")
    seen["write"] = "written"
except OSError as exc:
    seen["write"] = exc.errno
print(seen)
'''


@pytest.mark.slow  # starts a subprocess
def test_a_fresh_tmp_keeps_the_read_only_folders_bubblewrap_bound_below_it(tmp_path):
    """A worker's fresh /tmp drops what others left there but keeps each read-only bind bubblewrap
    made below it (an interpreter in a virtual environment under /tmp), still read-only."""
    if not isolation.bwrap_works():
        pytest.skip("bubblewrap cannot create namespaces here")
    kept = Path("/tmp") / tmp_path.name / "venv"
    kept.mkdir(parents=True, exist_ok=True)
    (kept / "kept.txt").write_text("the interpreter's files")
    try:
        command = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
                   "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", str(kept), str(kept),
                   "--ro-bind", str(ROOT), str(ROOT), "--setenv", "PYTHONPATH", str(ROOT)]
        for root in isolation.python_roots():  # as the sandbox binds them
            command += ["--ro-bind", root, root]
        command += [sys.executable, "-c", RO_UNDER_TMP, str(kept)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        if done.returncode and "unshare" in done.stderr:
            pytest.skip(f"no namespaces nested in bubblewrap here: {done.stderr.strip()[-200:]}")
        assert done.returncode == 0, done.stderr
        seen = ast.literal_eval(done.stdout.strip())
        assert seen == {"tmp": sorted({tmp_path.name} | _python_under_tmp(str(ROOT))),  # a checkout under /tmp too
                        "kept": "the interpreter's files", "write": errno.EROFS}
    finally:
        shutil.rmtree(kept.parent)


@pytest.mark.sandbox
@pytest.mark.parametrize("why", ["nested namespaces refused", "no template"])
def test_without_nested_namespaces_bubblewrap_workers_are_started_from_scratch(monkeypatch, why):
    monkeypatch.delenv("GRADE_NO_BWRAP", raising=False)
    if not isolation.bwrap_works():
        pytest.skip("bubblewrap cannot create namespaces here")
    if why == "no template":
        monkeypatch.setenv("GRADE_NO_ZYGOTE", "1")
    else:
        monkeypatch.setattr(isolation, "nested_namespaces", lambda _uid: "a worker inside bubblewrap cannot "
                                                                         "make namespaces of its own (refused)")
    with Sandbox({"w.py": NESTED}, ["w.py"]) as box:
        assert box._nested is None and not box.uses_zygote
        assert box.wait_ready().level.startswith("bubblewrap+")
        assert box.call("look").value["files"] == sorted(["w.py", ".home", ".tmp"])

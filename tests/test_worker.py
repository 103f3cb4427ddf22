"""grader/sandbox/worker.py's Worker, driven directly in this process.

The sandbox runs this class behind a pipe; here its requests are plain dicts, so
each answer can be looked at whole: import errors, missing functions, the values
it refuses to send (`_plain`), exception summaries that show only the student's
frames (`_summary`) and the timed-block operations.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
import torch

from grader.sandbox import protocol, timer, worker
from grader.sandbox.worker import MAX_TRACEBACK_FRAMES, Worker

STUDENT = '''
import errno

import torch

from helpers_w import twice


def add(a, b=1):
    return a + b


def doubled(x):
    return twice(x)


def boom(x):
    return torch.ones(2, 3) @ torch.ones(2, 3)  # the error is raised inside torch


def deep(n):
    return deep(n - 1) if n else 1 / 0


def todo(x):
    raise NotImplementedError("todo")


def leave():
    raise SystemExit(3)


def full():
    raise OSError(errno.EFBIG, "File too large")


def long_message():
    raise ValueError("x" * 5000)


def in_place(x, *, out):
    out.add_(1)
    return x


def softmax_inside(x):
    return torch.softmax(x, dim=-1)


def returns(value):
    return value


class Sneaky(torch.Tensor):
    pass


def subclass(x):
    return x.as_subclass(Sneaky)


def grad_tensor(x):
    return x * 2


def a_set():
    return {1, 2}


def nested_bad():
    return (torch.ones(1), {"ok": 1, "bad": object()})


def int_keys():
    return {1: torch.ones(1)}


def meta():
    return torch.float16, torch.device("cpu"), torch.Size([2, 3])


def numbers():
    return [None, True, 3, 2.5, "text"]
'''

HELPERS = "def twice(x):\n    return x * 2\n"
BROKEN_SYNTAX = "def f(:\n    pass\n"
RAISES_AT_IMPORT = "import helpers_w\n\nraise ValueError('bad module')\n"
EXITS_AT_IMPORT = "import sys\nsys.exit(4)\n"


def line_of(text: str, source: str = STUDENT) -> int:
    """The line number of the one line of `source` that contains `text`."""
    (number,) = [i for i, line in enumerate(source.splitlines(), 1) if text in line]
    return number


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> Path:
    """A student folder; whatever the Worker puts in sys.path and sys.modules is undone after."""
    for name, text in {"student_w.py": STUDENT, "helpers_w.py": HELPERS, "syntax_w.py": BROKEN_SYNTAX,
                       "raises_w.py": RAISES_AT_IMPORT, "exits_w.py": EXITS_AT_IMPORT}.items():
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.endswith("_w"):
            del sys.modules[name]


def make(workdir: Path, *modules: str) -> tuple[Worker, dict]:
    w = Worker(str(workdir), list(modules))
    return w, w.import_modules()


def call(w: Worker, name: str, *args, **kwargs) -> dict:
    return w.handle({"op": "call", "name": name, "args": list(args), "kwargs": kwargs})


# --------------------------------------------------------------- importing


def test_import_lists_the_functions_and_no_errors(workdir):
    _, hello = make(workdir, "student_w.py")
    assert hello["import_errors"] == {}
    assert {"add", "doubled", "boom", "twice"} <= set(hello["functions"])


def test_every_import_error_is_summarised_per_module(workdir):
    w, hello = make(workdir, "student_w.py", "missing_w.py", "syntax_w.py", "raises_w.py", "exits_w.py")
    errors = hello["import_errors"]
    assert set(errors) == {"missing_w", "syntax_w", "raises_w", "exits_w"}
    assert errors["missing_w"]["type"] == "FileNotFoundError"
    assert errors["missing_w"]["message"] == "missing_w.py was not submitted"
    assert errors["syntax_w"]["type"] == "SyntaxError" and "(syntax_w.py, line 1)" in errors["syntax_w"]["message"]
    assert errors["raises_w"] == {"type": "ValueError", "message": "bad module", "not_implemented": False,
                                  "frames": ["raises_w.py, line 3, in <module>: raise ValueError('bad module')"]}
    assert errors["exits_w"]["message"] == "called sys.exit(4)"
    assert call(w, "add", 1)["value"] == 2  # the modules that imported still serve


def test_a_missing_function_reports_the_import_errors(workdir):
    w, _ = make(workdir, "student_w.py", "syntax_w.py")
    reply = call(w, "no_such_function")
    assert reply["ok"] is False and reply["missing"] is True
    assert set(reply["import_errors"]) == {"syntax_w"}
    w, _ = make(workdir, "student_w.py")
    assert call(w, "no_such_function") == {"ok": False, "missing": True, "import_errors": {}}


def test_a_module_level_value_is_not_a_function(workdir):
    (workdir / "values_w.py").write_text("add = 3\n")
    w, hello = make(workdir, "values_w.py", "student_w.py")
    assert "add" in hello["functions"] and call(w, "add", 1)["value"] == 2  # the callable one is found


# ------------------------------------------------------------------- calls


def test_calls_return_values_and_facts(workdir):
    w, _ = make(workdir, "student_w.py")
    reply = call(w, "add", torch.ones(2), b=torch.ones(2))
    assert reply["ok"] and torch.equal(reply["value"], torch.full((2,), 2.0))
    assert reply["facts"]["mutated_inputs"] == [] and reply["facts"]["forbidden_calls"] == []
    assert torch.equal(call(w, "doubled", torch.ones(1))["value"], torch.full((1,), 2.0))  # via a helper


def test_forbidden_calls_and_in_place_changes_are_reported(workdir):
    w, _ = make(workdir, "student_w.py")
    x = torch.randn(3)
    reply = w.handle({"op": "call", "name": "softmax_inside", "args": [x], "forbidden": ["softmax"]})
    assert reply["ok"] and reply["facts"]["forbidden_calls"] == ["softmax"]
    out = torch.zeros(2)
    reply = call(w, "in_place", torch.zeros(2), out=out)
    assert reply["ok"] and reply["facts"]["mutated_inputs"] == ["argument 'out'"]


def test_ping_and_unknown_ops(workdir):
    w, _ = make(workdir, "student_w.py")
    assert w.handle({"op": "ping"}) == {"ok": True, "value": "pong"}
    reply = w.handle({"op": "exec", "code": "1"})
    assert reply["ok"] is False and reply["error"]["type"] == "ProtocolError"
    assert "'exec'" in reply["error"]["message"]


# ----------------------------------------------------------------- _summary


def test_summary_shows_only_the_students_frames(workdir):
    w, _ = make(workdir, "student_w.py")
    error = call(w, "boom", 1)["error"]
    assert error["type"] == "RuntimeError" and "cannot be multiplied" in error["message"]
    line = line_of("return torch.ones(2, 3) @")
    assert error["frames"] == [f"student_w.py, line {line}, in boom: return torch.ones(2, 3) @ torch.ones(2, 3)"
                               "  # the error is raised inside torch"]  # neither torch's frames nor the worker's


def test_summary_keeps_the_last_frames_of_a_deep_stack(workdir):
    w, _ = make(workdir, "student_w.py")
    error = call(w, "deep", 20)["error"]
    assert error["type"] == "ZeroDivisionError"
    assert len(error["frames"]) == MAX_TRACEBACK_FRAMES
    line = line_of("return deep(n - 1)")
    assert all(f.startswith(f"student_w.py, line {line}, in deep") for f in error["frames"])


def test_summary_of_special_exceptions(workdir):
    w, _ = make(workdir, "student_w.py")
    todo = call(w, "todo", 1)["error"]
    assert todo["not_implemented"] is True and todo["message"] == "todo"
    assert call(w, "leave")["error"]["message"] == "called sys.exit(3)"
    assert call(w, "full")["error"]["message"] == "the output limit was reached: the code printed or wrote too much"
    assert len(call(w, "long_message")["error"]["message"]) == 2000
    assert call(w, "add", 1)["ok"]  # none of these ended the worker


def test_summary_of_an_exception_outside_the_workdir(tmp_path):
    try:
        raise KeyError("k")
    except KeyError as exc:
        summary = worker._summary(exc, str(tmp_path))
    assert summary == {"type": "KeyError", "message": "'k'", "frames": [], "not_implemented": False}


# ------------------------------------------------------------------- _plain


def test_plain_values_pass_unchanged(workdir):
    w, _ = make(workdir, "student_w.py")
    assert call(w, "numbers")["value"] == [None, True, 3, 2.5, "text"]
    assert call(w, "meta")["value"] == (torch.float16, torch.device("cpu"), torch.Size([2, 3]))
    value = call(w, "returns", {"w": (torch.ones(2), [torch.zeros(1)])})["value"]
    assert type(value["w"]) is tuple and type(value["w"][1]) is list


def test_tensor_subclasses_are_stripped_and_grads_detached(workdir):
    w, _ = make(workdir, "student_w.py")
    x = torch.arange(4.0)
    value = call(w, "subclass", x)["value"]
    assert type(value) is torch.Tensor and torch.equal(value, x)
    assert value.data_ptr() != x.data_ptr()  # a copy, not a view of the subclass's storage
    value = call(w, "grad_tensor", torch.ones(2, requires_grad=True))["value"]
    assert not value.requires_grad and value.grad_fn is None


def test_values_that_are_not_plain_are_refused_with_their_path(workdir):
    w, _ = make(workdir, "student_w.py")
    reply = call(w, "a_set")
    assert reply["ok"] is False and reply["unsupported"] == "value is a builtins.set" and "facts" in reply
    assert call(w, "nested_bad")["unsupported"] == "value[1]['bad'] is a builtins.object"
    assert call(w, "int_keys")["unsupported"] == "value is a builtins.dict"
    assert call(w, "returns", Path("/tmp"))["unsupported"].startswith("value is a pathlib.")


def test_plain_directly():
    class Tuple(tuple):
        pass

    assert worker._plain((1, [2.0, "a"])) == (1, [2.0, "a"])
    with pytest.raises(TypeError, match=r"value is a .*Tuple"):
        worker._plain(Tuple((1,)))  # a subclass of tuple could carry code too
    with pytest.raises(TypeError, match=r"value\[0\] is a builtins.bytes"):
        worker._plain([b"raw"])
    # what passes can always be sent and read back under weights_only
    sent = worker._plain({"t": torch.ones(2).as_subclass(type("S", (torch.Tensor,), {})), "d": torch.int8})
    assert torch.equal(protocol.decode(protocol.encode(sent)[protocol.HEADER.size:])["t"], torch.ones(2))


# -------------------------------------------------- time_block / timed_outputs


def _block_request(name: str, spec: timer.PoolSpec, shapes, calls) -> dict:
    return {"op": "time_block", "name": name, "pool": spec.to_message(), "shapes": shapes, "calls": calls,
            "kwargs": {"b": 1}, "projection_seed": 5}


def test_time_block_matches_the_same_block_run_by_the_trusted_side(workdir):
    w, _ = make(workdir, "student_w.py")
    shapes = [[4, 8]]
    spec = timer.PoolSpec(seed=3, numel=timer.pool_size(shapes), dtype="float32", device="cpu")
    calls = timer.random_offsets(shapes, spec.numel, 3, random.Random(1))
    reply = w.handle(_block_request("add", spec, shapes, calls))
    assert reply["ok"], reply
    expected = timer.run_block(lambda a, b: a + b, timer.make_pool(spec), shapes, calls, {"b": 1}, 5, "cpu")
    assert reply["value"]["checksums"] == expected.checksums
    assert len(reply["value"]["event_ms"]) == 3
    pool = w.pool
    assert w.handle(_block_request("add", spec, shapes, calls))["ok"] and w.pool is pool  # same spec: reused
    outputs = w.handle({"op": "timed_outputs", "indices": [2, 0]})
    assert outputs["ok"]
    assert torch.equal(outputs["value"][0], expected.outputs[2]) and torch.equal(outputs["value"][1],
                                                                                 expected.outputs[0])


def test_timed_outputs_refuse_bad_indices_and_values(workdir):
    w, _ = make(workdir, "student_w.py")
    assert w.handle({"op": "timed_outputs", "indices": [0]})["ok"] is False  # no block yet
    shapes = [[2, 2]]
    spec = timer.PoolSpec(seed=1, numel=timer.pool_size(shapes), dtype="float32", device="cpu")
    calls = timer.random_offsets(shapes, spec.numel, 2, random.Random(2))
    assert w.handle(_block_request("add", spec, shapes, calls))["ok"]
    assert "out of range" in w.handle({"op": "timed_outputs", "indices": [7]})["unsupported"]
    assert w.handle({"op": "timed_outputs", "indices": ["one"]})["ok"] is False
    (workdir / "sets_w.py").write_text("def as_set(a, b):\n    return {1}\n")
    w, _ = make(workdir, "sets_w.py")
    assert w.handle(_block_request("as_set", spec, shapes, calls))["ok"]  # checksums are NaN, not an error
    assert w.handle({"op": "timed_outputs", "indices": [0]}) == {"ok": False,
                                                                 "unsupported": "value is a builtins.set"}


def test_time_block_of_a_missing_or_failing_function(workdir):
    w, _ = make(workdir, "student_w.py")
    shapes = [[2]]
    spec = timer.PoolSpec(seed=1, numel=timer.pool_size(shapes), dtype="float32", device="cpu")
    calls = timer.random_offsets(shapes, spec.numel, 1, random.Random(3))
    assert w.handle(_block_request("nope", spec, shapes, calls)) == {"ok": False, "missing": True,
                                                                     "import_errors": {}}
    reply = w.handle(_block_request("todo", spec, shapes, calls))  # todo() takes no `b`: TypeError
    assert reply["ok"] is False and reply["error"]["type"] == "TypeError"
    assert w.timed == []  # a failed block keeps no outputs


def test_a_folder_is_measured_by_its_blocks_each_entry_one_at_least(tmp_path):
    """The write budget's measure: allocated blocks, each entry at least one block, a hard link once, a
    link not followed; it stops counting at `stop_at`."""
    import os

    from grader.sandbox.limits import BLOCK, folder_bytes

    (tmp_path / "sub").mkdir()
    for i in range(10):
        (tmp_path / "sub" / f"empty{i}").touch()
    (tmp_path / "big").write_bytes(b"x" * (1 << 20))
    os.link(tmp_path / "big", tmp_path / "big_again")
    (tmp_path / "outside").symlink_to("/usr")
    measured = folder_bytes(str(tmp_path))
    assert measured == (1 << 20) + BLOCK * (1 + 10 + 1), measured  # big, sub, ten empty files, the link
    assert BLOCK <= folder_bytes(str(tmp_path), stop_at=BLOCK) < measured
    assert folder_bytes(str(tmp_path / "gone")) == 0


def test_a_folder_made_unreadable_is_still_measured():
    """A worker cannot hide files from the measure by taking the permissions off a folder: its owner
    measures them all the same (a child running as the folder's owner, when the tests run as root)."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o711)  # another uid may pass through
        _measure_unreadable(Path(folder) / "worker")


def _measure_unreadable(tmp_path: Path) -> None:
    import os

    from grader.sandbox.limits import folder_bytes

    tmp_path.mkdir()
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "data").write_bytes(b"x" * (1 << 20))
    owner = 65534 if os.geteuid() == 0 else os.geteuid()
    for path in (tmp_path, hidden, hidden / "data"):
        if os.geteuid() == 0:
            os.chown(path, owner, owner)
    hidden.chmod(0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        if os.geteuid() == 0:
            os.setgroups([])
            os.setresgid(owner, owner, owner)
            os.setresuid(owner, owner, owner)
        os.write(write, str(folder_bytes(str(tmp_path))).encode())
        os._exit(0)
    os.close(write)
    measured = int(os.read(read, 64))
    os.close(read)
    os.waitpid(pid, 0)
    assert measured >= 1 << 20
    hidden.chmod(0o700)  # so that the folder can be removed

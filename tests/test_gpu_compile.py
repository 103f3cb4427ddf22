"""Contract kernels compiled for a GPU target on the CPU (grader.intake.gpu_compile): what the
interpreter runs but Triton's compiler refuses is a finding with Triton's message and line."""

from __future__ import annotations

import json
import shutil

import pytest

from grader.core.course import Course
from grader.intake.gpu_compile import CACHE_FILE, compile_for_gpu
from grader.intake.kernels import COMPILE, kernel_module
from tests.conftest import ROOT, grade_workspace

CONTRACT = '''import copy_kernel

def specialisations():
    """One launch: X, Y float32 pointers, N an int32, BLOCK = 64."""
    return [("_copy", ["*fp32", "*fp32", "i32"], {"BLOCK": 64}, {"num_warps": 4, "num_stages": 1})]
'''
RIGHT = '''import triton
import triton.language as tl


@triton.jit
def _copy(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)
'''
# The interpreter runs both; a GPU compiler refuses them.
NOT_COMPILABLE = {
    "a tl.arange bound that is not a constexpr": (RIGHT.replace("tl.arange(0, BLOCK)", "tl.arange(0, N)"), 7,
                                                 "arange's arguments must be of type tl.constexpr"),
    "int() of a tensor at compile time": (RIGHT.replace("    tl.store(", "    n = int(N)\n    tl.store("), 8,
                                          "int() argument must be"),
}


def _vetted(source: str) -> str:
    module = kernel_module("copy_kernel.py", source, ("_copy",))
    assert module.problems == () and module.found == ("_copy",)  # every name resolves: the compiler decides
    return module.source


@pytest.fixture
def contract(tmp_path):
    path = tmp_path / "contract" / "copy_contract.py"
    path.parent.mkdir()
    path.write_text(CONTRACT)
    return path


def test_a_right_kernel_compiles_and_is_cached(tmp_path, contract) -> None:
    cache = tmp_path / "state"
    first = compile_for_gpu("copy_kernel.py", _vetted(RIGHT), contract, cache)
    if first.status == "skipped":
        pytest.skip(f"this Triton cannot compile for the target here: {first.why}")
    assert (first.status, first.launches, first.problems, first.cached) == ("compiled", 1, (), False)
    assert len(json.loads((cache / CACHE_FILE).read_text())) == 1
    again = compile_for_gpu("copy_kernel.py", _vetted(RIGHT), contract, cache)
    assert again.cached and again.status == "compiled" and again.summary() == first.summary()


@pytest.mark.parametrize("name", sorted(NOT_COMPILABLE))
def test_what_a_gpu_refuses_is_a_problem_with_tritons_message_and_line(tmp_path, contract, name: str) -> None:
    source, line, words = NOT_COMPILABLE[name]
    found = compile_for_gpu("copy_kernel.py", _vetted(source), contract, None)
    if found.status == "skipped":
        pytest.skip(f"this Triton cannot compile for the target here: {found.why}")
    assert found.status == "failed" and len(found.problems) == 1
    problem = found.problems[0]
    assert (problem.kernel, problem.line, problem.kind) == ("_copy", line, COMPILE), problem
    assert "Triton cannot compile _copy for a GPU" in problem.text and "BLOCK=64" in problem.text
    assert words in problem.text


def test_a_contract_without_launches_is_skipped_as_data(tmp_path) -> None:
    path = tmp_path / "bare_contract.py"
    path.write_text("import copy_kernel\n")
    found = compile_for_gpu("copy_kernel.py", _vetted(RIGHT), path, tmp_path / "state")
    assert (found.status, found.problems) == ("skipped", ())
    assert found.why and found.summary().startswith("skipped: ")


@pytest.mark.slow
def test_the_reference_kernels_compile_at_every_launch_of_the_hidden_tests() -> None:
    text = (ROOT / "reference" / "assignment3" / "flash.py").read_text()
    kernels = ("_flash_fwd_kernel", "_flash_bwd_dkdv_kernel", "_flash_bwd_dq_kernel")
    vetted = kernel_module("flash.py", text, kernels)
    found = compile_for_gpu("flash.py", vetted.source, ROOT / "assignments" / "assignment3" / "contract.py", None)
    if found.status == "skipped":
        pytest.skip(found.why)
    assert (found.status, found.problems, found.launches) == ("compiled", (), 26)


@pytest.fixture(scope="module")
def course() -> Course:
    return Course(ROOT)


def _flash_workspace(tmp_path, text: str):
    work = tmp_path / "student"
    work.mkdir()
    (work / "flash.py").write_text(text)
    shutil.copy(ROOT / "reference" / "assignment3" / "efficient.py", work / "efficient.py")
    return work


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_kernel_a_gpu_refuses_earns_no_kernel_points(course, tmp_path) -> None:
    reference = (ROOT / "reference" / "assignment3" / "flash.py").read_text()
    old = "    offs_n = tl.arange(0, BLOCK_N)  # [BLOCK_N]\n"
    assert reference.count(old) == 1
    line = reference[:reference.index(old)].count("\n") + 1
    broken = reference.replace(old, "    offs_n = tl.arange(0, N_KV)  # [BLOCK_N]: runs in the interpreter\n")
    result = grade_workspace(course, "assignment3", _flash_workspace(tmp_path, broken), student="student",
                             only_task="flash_forward", allow_weak_sandbox=True, use_gpu=False)
    if result.versions.get("gpu_compile", "").startswith("skipped"):
        pytest.skip(result.versions["gpu_compile"])
    findings = [(f.task, f.group, f.function, f.line) for f in result.findings]
    assert findings == [("flash_forward", "kernel_code", "_flash_fwd_kernel", line)]
    assert "arange's arguments must be of type tl.constexpr" in result.findings[0].code
    task = next(t for t in result.score.tasks if t.task_id == "flash_forward")
    assert task.earned == 0 and task.status == "forbidden"


@pytest.mark.sandbox
@pytest.mark.slow
def test_a_kernel_behind_an_adapter_keeps_its_points(course, tmp_path) -> None:
    text = (ROOT / "tests" / "fixtures" / "triton_kernels" / "inner_jit_adapter.py").read_text()
    result = grade_workspace(course, "assignment3", _flash_workspace(tmp_path, text), student="student",
                             only_task="flash_forward", allow_weak_sandbox=True, use_gpu=False)
    assert result.findings == ()
    assert not result.versions.get("gpu_compile", "").startswith("failed")
    task = next(t for t in result.score.tasks if t.task_id == "flash_forward")
    assert task.earned == task.points

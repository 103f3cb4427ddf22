"""grader/sandbox/facts.py directly: what `observe` records about one call, the input
snapshots that tell an in-place change, and the Triton launch counter.

The same code runs in the sandbox worker and in plain pytest, so it is exercised
here in this process, on real tensors and a real (interpreted) Triton kernel.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from grader.sandbox import facts
from grader.sandbox.facts import CallFacts, changed_inputs, observe, snapshot_inputs

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def _copy(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)


def copy(x, launches=1):
    y = x.new_empty(x.shape)
    for _ in range(launches):
        _copy[(triton.cdiv(x.numel(), 16),)](x, y, x.numel(), BLOCK=16)
    return y
'''


# ----------------------------------------------------------------- observe


def test_forbidden_calls_are_recorded_by_group_once_each():
    x = torch.randn(3, 4)
    alias = torch.nn.functional.softmax
    with observe(("softmax", "matmul")) as seen:
        torch.softmax(x, dim=-1)
        x.softmax(-1)  # a Tensor method
        alias(x, dim=-1)  # an alias
        x @ x.T
    assert seen.forbidden_calls == ["softmax", "matmul"]


def test_only_the_forbidden_groups_asked_for_are_recorded():
    x, xt = torch.randn(3, 4), torch.randn(4, 3)
    with observe(("sdpa", "no such group")) as seen:
        torch.softmax(x, dim=-1)
        torch.matmul(x, xt)
    assert seen.forbidden_calls == []
    assert seen.ops_seen == 2  # the recorder ran: it watched for sdpa


def test_every_group_of_the_table_is_seen_at_run_time():
    q = torch.randn(1, 2, 4, 8)
    calls = {
        "softmax": lambda: q.log_softmax(-1),
        "sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(q, q, q),
        "matmul": lambda: torch.einsum("bhqd,bhkd->bhqk", q, q),
        "multihead_attention": lambda: torch.nn.MultiheadAttention(8, 2, batch_first=True)(
            q[0], q[0], q[0], need_weights=False),
    }
    for group, call in calls.items():
        with observe((group,)) as seen:
            call()
        assert seen.forbidden_calls == [group], group


def test_largest_tensor_is_tracked_only_when_asked():
    x, xt = torch.randn(8, 16), torch.randn(16, 8)
    with observe(track_tensors=True) as tracked:
        scores = x @ xt  # 8 x 8
        torch.cat([scores, scores])  # 16 x 8: the largest
        scores.sum()
    assert tracked.largest_tensor_numel == 128 and tracked.ops_seen == 3
    with observe() as untracked:  # nothing forbidden, nothing tracked: no recorder at all
        torch.cat([x @ xt] * 4)
    assert untracked.largest_tensor_numel == 0 and untracked.ops_seen == 0


def test_tuple_outputs_count_towards_the_largest_tensor():
    x = torch.randn(10, 30)
    with observe(track_tensors=True) as seen:
        x.split(5, dim=0)  # two 5 x 30 tensors
    assert seen.largest_tensor_numel == 150


def test_facts_are_filled_in_when_the_call_raises():
    with pytest.raises(RuntimeError), observe(("softmax",), track_tensors=True) as seen:
        torch.softmax(torch.randn(2, 3), dim=-1)
        torch.ones(2, 3) @ torch.ones(2, 3)  # shapes do not fit
    assert seen.forbidden_calls == ["softmax"] and seen.largest_tensor_numel == 6
    assert seen.wall_s >= 0 and seen.memory_kind == "rss"


def test_peak_memory_is_measured_on_the_cpu():
    with observe(device="cpu") as seen:
        block = torch.ones(64 << 20, dtype=torch.uint8)  # 64 MiB, every page touched
        del block
    assert seen.memory_kind == "rss" and seen.peak_memory_bytes >= 32 << 20


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback without CUDA")
def test_a_cuda_device_without_cuda_falls_back_to_rss():
    with observe(device="cuda") as seen:
        torch.zeros(4)
    assert seen.memory_kind == "rss"


def test_call_facts_round_trip_as_a_message():
    sent = CallFacts(wall_s=0.5, triton_launches=2, forbidden_calls=["sdpa"], largest_tensor_numel=9,
                     ops_seen=4, peak_memory_bytes=10, memory_kind="cuda", mutated_inputs=["argument 1"],
                     memory_measured_by="grader")
    assert CallFacts.from_message(sent.to_message()) == sent
    assert CallFacts.from_message(None) == CallFacts() == CallFacts.from_message({})
    with pytest.raises(TypeError):
        CallFacts.from_message({"not_a_field": 1})


# ---------------------------------------------------------- input snapshots


def test_snapshots_copy_only_the_tensor_arguments():
    x, mask = torch.randn(3), torch.ones(3, dtype=torch.bool)
    before = snapshot_inputs((x, 2, "text"), {"mask": mask, "scale": 0.5})
    assert list(before) == ["argument 1", "argument 'mask'"]
    x.add_(1)  # the copy does not follow the original
    assert not torch.equal(before["argument 1"], x)


def test_snapshots_are_detached():
    x = torch.randn(3, requires_grad=True)
    assert not snapshot_inputs((x,), {})["argument 1"].requires_grad


def test_changed_inputs_names_positional_and_keyword_arguments():
    x, y, mask = torch.randn(4), torch.randn(4), torch.ones(4, dtype=torch.bool)
    before = snapshot_inputs((x, y), {"mask": mask})
    assert changed_inputs(before, (x, y), {"mask": mask}) == []
    y.mul_(2)
    mask[0] = False
    assert changed_inputs(before, (x, y), {"mask": mask}) == ["argument 2", "argument 'mask'"]


def test_an_input_holding_nan_is_not_reported_as_changed():
    x = torch.tensor([1.0, float("nan")])  # NaN != NaN: torch.equal alone would say it changed
    before = snapshot_inputs((x,), {})
    assert changed_inputs(before, (x,), {}) == []
    x[1] = 0.0  # the NaN is overwritten: a real change
    assert changed_inputs(before, (x,), {}) == ["argument 1"]


# ---------------------------------------------------------- Triton launches


@pytest.fixture
def kernel_module(tmp_path, monkeypatch):
    """A real @triton.jit kernel in a file of its own, defined under Triton's interpreter."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read when the kernel is decorated
    path = tmp_path / "launching.py"
    path.write_text(KERNEL)
    spec = importlib.util.spec_from_file_location("_facts_launching", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "_facts_launching", module)
    spec.loader.exec_module(module)
    return module


def test_triton_launches_are_counted_per_call(kernel_module):
    x = torch.arange(40, dtype=torch.float32)
    kernel_module.copy(x)  # a launch outside observe() is not counted in the next call
    with observe() as once:
        y = kernel_module.copy(x)
    with observe() as three:
        kernel_module.copy(x, launches=3)
    with observe() as none:
        x.clone()
    assert torch.equal(y, x)
    assert (once.triton_launches, three.triton_launches, none.triton_launches) == (1, 3, 0)


def test_the_counter_is_installed_once(kernel_module):
    facts.install_triton_counter()
    facts.install_triton_counter()  # a second install must not count every launch twice
    with observe() as seen:
        kernel_module.copy(torch.ones(5))
    assert seen.triton_launches == 1


def test_sparse_softmax_and_its_backward_are_seen_at_the_dispatcher():
    """torch.sparse's softmax reaches operations of its own (_sparse_softmax, its log and backward forms):
    the dispatcher's table names them, whatever Python route led there."""
    from grader.sandbox.facts import _OperationRecorder
    from grader.sandbox.forbidden import OPERATIONS

    x = torch.randn(3, 4)
    forward = {"_sparse_softmax": lambda s: torch.sparse.softmax(s, -1),
               "_sparse_log_softmax": lambda s: torch.sparse.log_softmax(s, -1)}
    seen: list[str] = []

    class Names(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func._overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    for name, call in forward.items():
        seen.clear()
        leaf = x.to_sparse().requires_grad_()
        facts = CallFacts()
        with _OperationRecorder({"softmax": OPERATIONS["softmax"]}, facts), Names():
            torch.sparse.sum(call(leaf)).backward()
        assert facts.forbidden_calls == ["softmax"], name
        assert name in seen and f"{name}_backward_data" in seen, seen
        assert {name, f"{name}_backward_data"} <= OPERATIONS["softmax"]

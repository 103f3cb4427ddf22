"""assignment2 content: the reference agrees with the implementations people use,
and the hidden suite tells the reference, the stubs and every known wrong version apart.

* multi_head_attention against torch.nn.MultiheadAttention,
* apply_rope against HuggingFace transformers' Llama rotary embedding (a dev
  dependency: skipped without it) and against Meta's interleaved layout,
* alibi_slopes against the ALiBi paper's published rule (and BLOOM's code),
* the hidden suite: reference all pass, stubs all fail, each mutant fails only
  its own task and is diagnosed as itself; the public tests likewise.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `reference` is a top-level package of the course root
    sys.path.insert(0, str(ROOT))

from grader.core.manifest import load_manifest  # noqa: E402
from grader.harness.catalogue import load_mutants  # noqa: E402
from reference.assignment2 import multihead, positions  # noqa: E402
from tests import content_harness as harness  # noqa: E402

ASSIGNMENT = ROOT / "assignments" / "assignment2"
REFERENCE = ROOT / "reference" / "assignment2"
MANIFEST = load_manifest(ASSIGNMENT / "assignment.toml")
MUTANTS = load_mutants("reference.assignment2.mutants")


def max_error(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max())


# =============================================================================
# multi_head_attention vs torch.nn.MultiheadAttention
# =============================================================================


def _torch_mha(w_q, w_k, w_v, w_o, n_heads: int, bias: bool) -> torch.nn.MultiheadAttention:
    d_model = w_q.shape[0]
    module = torch.nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True,
                                         dtype=w_q.dtype)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))  # (3 d_model, d_model)
        module.out_proj.weight.copy_(w_o)
        if bias:
            module.in_proj_bias.zero_()
            module.out_proj.bias.zero_()
    return module.eval()


def _mha_cases(dtype: torch.dtype):
    """(name, x_q, x_kv, n_heads, our mask, nn.MHA keyword arguments)."""
    g = torch.Generator().manual_seed(0)
    randn = lambda *shape: torch.randn(*shape, generator=g, dtype=dtype)
    x, x_q, x_kv = randn(2, 6, 16), randn(2, 3, 16), randn(2, 7, 16)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()  # (L, L)
    per_head = torch.rand(2, 4, 3, 7, generator=g) < 0.6  # (B, H, Lq, Lk)
    per_head[..., 0] = True
    valid = torch.arange(7) < torch.tensor([[5], [7]])  # (B, Lk) key padding
    return [
        ("self", x, x, 4, None, {}),
        ("cross", x_q, x_kv, 2, None, {}),
        ("causal", x, x, 4, causal, {"attn_mask": ~causal}),
        ("per_head", x_q, x_kv, 4, per_head, {"attn_mask": (~per_head).reshape(8, 3, 7)}),
        ("padding", x_q, x_kv, 4, valid[:, None, None, :], {"key_padding_mask": ~valid}),
    ]


@pytest.mark.parametrize("bias", [False, True], ids=["no_bias", "zero_bias"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_multi_head_attention_matches_torch(dtype, bias):
    g = torch.Generator().manual_seed(1)
    weights = [torch.randn(16, 16, generator=g, dtype=dtype) / 4 for _ in range(4)]
    atol = 1e-5 if dtype == torch.float32 else 1e-12
    for name, x_q, x_kv, n_heads, mask, kwargs in _mha_cases(dtype):
        ours = multihead.multi_head_attention(x_q, x_kv, *weights, n_heads, mask=mask)
        with torch.no_grad():
            theirs, _ = _torch_mha(*weights, n_heads, bias)(x_q, x_kv, x_kv, need_weights=False,
                                                            **kwargs)
        assert ours.shape == theirs.shape and ours.dtype == dtype, name
        assert max_error(ours, theirs) < atol, f"{name}: max error {max_error(ours, theirs):.3g}"


def test_split_and_merge_heads_are_inverse_views():
    x = torch.randn(2, 5, 12)
    heads = multihead.split_heads(x, 3)  # (B, H, L, Dh)
    assert heads.shape == (2, 3, 5, 4)
    assert torch.equal(heads[:, 1], x[..., 4:8])  # head 1 owns columns 4..7
    assert torch.equal(multihead.merge_heads(heads), x)


# =============================================================================
# apply_rope vs HuggingFace transformers (Llama) and Meta's interleaved layout
# =============================================================================


@pytest.mark.slow
@pytest.mark.parametrize(("base", "factor", "dtype"), [
    (10000.0, 1.0, torch.float32),
    (500000.0, 1.0, torch.float32),
    (10000.0, 4.0, torch.float32),
    (10000.0, 1.0, torch.bfloat16),
])
def test_apply_rope_matches_transformers_llama(base, factor, dtype):
    pytest.importorskip("transformers", minversion="4.45")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import (
        LlamaRotaryEmbedding,
        apply_rotary_pos_emb,
    )

    scaling = None if factor == 1.0 else {"rope_type": "linear", "factor": factor}
    config = LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, head_dim=16,
                         intermediate_size=8, num_hidden_layers=1, vocab_size=8,
                         max_position_embeddings=4096, rope_theta=base, rope_scaling=scaling)
    rotary = LlamaRotaryEmbedding(config=config)
    g = torch.Generator().manual_seed(2)
    q = torch.randn(2, 4, 9, 16, generator=g).to(dtype)  # (B, H, L, Dh)
    k = torch.randn(2, 4, 9, 16, generator=g).to(dtype)
    pos = torch.arange(9) + 40
    cos, sin = rotary(q, pos[None].expand(2, 9))  # (B, L, Dh) each
    q_hf, k_hf = apply_rotary_pos_emb(q, k, cos, sin)
    q_ours = positions.apply_rope(q, pos, base=base, scale=factor)
    k_ours = positions.apply_rope(k, pos, base=base, scale=factor)
    # HF rounds cos and sin to the input dtype before multiplying; we round once at the end.
    atol = 2e-5 if dtype == torch.float32 else 3e-2
    assert q_ours.dtype == dtype
    assert max_error(q_ours, q_hf) < atol and max_error(k_ours, k_hf) < atol
    hf_freq = rotary.inv_freq * factor  # HF folds the linear factor into inv_freq
    assert max_error(positions.rope_frequencies(16, base), hf_freq) < 1e-6


def _meta_rope(x: torch.Tensor, pos: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Meta's original Llama layout: pairs (2i, 2i+1) turned as complex numbers."""
    d_head = x.shape[-1]
    freq = 1.0 / base ** (torch.arange(0, d_head, 2).double() / d_head)  # (D/2,)
    turn = torch.polar(torch.ones(len(pos), d_head // 2, dtype=torch.float64),
                       torch.outer(pos.double(), freq))  # (L, D/2) unit complex numbers
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)  # (..., L, D)


def _to_half_split(x):  # interleaved (x0, x1, x2, x3, ...) → half-split (x0, x2, ... | x1, x3, ...)
    return torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)


def _to_interleaved(x):  # the inverse permutation
    half = x.shape[-1] // 2
    return torch.stack([x[..., :half], x[..., half:]], dim=-1).flatten(-2)


def test_interleaved_layout_is_a_permutation_of_ours():
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 3, 7, 32, generator=g, dtype=torch.float64)
    k = torch.randn(2, 3, 7, 32, generator=g, dtype=torch.float64)
    pos = torch.arange(7) * 5 + 2
    meta_q = _meta_rope(q, pos)
    ours_q = _to_interleaved(positions.apply_rope(_to_half_split(q), pos))
    assert max_error(ours_q, meta_q) < 1e-12
    # Scores do not care about the order of the features: the layouts agree on q·k.
    meta_scores = meta_q @ _meta_rope(k, pos).transpose(-2, -1)
    ours_scores = (positions.apply_rope(_to_half_split(q), pos)
                   @ positions.apply_rope(_to_half_split(k), pos).transpose(-2, -1))
    assert max_error(ours_scores, meta_scores) < 1e-12
    # The catalogue's interleaved mutant is exactly Meta's layout.
    interleaved = next(m for m in MUTANTS if m.id == "rope_interleaved")
    assert max_error(interleaved.fn(q, pos), meta_q) < 1e-12


def test_rope_properties_on_the_reference():
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    assert torch.equal(positions.apply_rope(x, torch.zeros(6, dtype=torch.long)), x)
    pos = torch.tensor([3, 0, 9, 4, 4, 1])
    near = positions.apply_rope(x, pos) @ positions.apply_rope(x, pos).transpose(-2, -1)
    far = positions.apply_rope(x, pos + 1000) @ positions.apply_rope(x, pos + 1000).transpose(-2, -1)
    assert max_error(near, far) < 1e-10


# =============================================================================
# ALiBi slopes vs the paper's published rule
# =============================================================================


def _paper_slopes(n: int) -> list[float]:
    """The ALiBi paper's rule (Press et al., 2022, reference code `get_slopes`)."""

    def power_of_two(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_two(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_two(closest) + _paper_slopes(2 * closest)[0::2][: n - closest]


def test_alibi_slopes_match_the_paper():
    published_8 = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    assert torch.equal(positions.alibi_slopes(8), published_8)
    for n_heads in (8, 12, 16, *range(1, 65)):
        ours = positions.alibi_slopes(n_heads)
        assert ours.dtype == torch.float32 and ours.shape == (n_heads,)
        error = max_error(ours, torch.tensor(_paper_slopes(n_heads)))
        assert error < 1e-7, f"{n_heads} heads: max error {error:.3g}"


def test_alibi_matches_bloom():
    pytest.importorskip("transformers", minversion="4.45")
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    for n_heads in (8, 12, 16, 20):
        bloom = build_alibi_tensor(torch.ones(1, 9), n_heads, torch.float32)  # (H, 1, Lk): m_h * j
        assert max_error(positions.alibi_slopes(n_heads), bloom[:, 0, 1]) < 1e-7
        ours = positions.alibi_bias(n_heads, 4, 9)  # (H, Lq, Lk)
        # Same scores after softmax: the two differ by a constant per query row.
        assert max_error(ours - ours[..., :1], bloom) < 1e-5


def test_alibi_bias_alignment_on_the_reference():
    bias = positions.alibi_bias(2, 2, 5)  # queries at positions 3 and 4
    m = positions.alibi_slopes(2)
    assert torch.equal(bias[:, 0], -m[:, None] * torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0]))
    assert torch.equal(bias[:, 1], -m[:, None] * torch.tensor([4.0, 3.0, 2.0, 1.0, 0.0]))


# =============================================================================
# The hidden and public suites: reference, stubs, mutants
# =============================================================================


SEED = 20270111


@pytest.fixture
def one_thread():
    """Tiny tensors: torch's thread pool only costs time in the nested runs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_hidden_suite_on_the_command_line():
    """Plain pytest as an author runs it (the workspace defaults to the reference): all pass.
    The stubs' side is checked in-process below, to save a second interpreter start."""
    command = [sys.executable, "-m", "pytest", str(REFERENCE / "tests"), "-q",
               "-p", "no:cacheprovider"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("suite", ["hidden", "public"])
def test_reference_passes_and_stubs_fail(suite, one_thread):
    tests = (REFERENCE if suite == "hidden" else ASSIGNMENT) / "tests"
    on_reference = harness.run_suite([tests], REFERENCE, SEED)
    assert not harness.reference_problems(on_reference), harness.reference_problems(on_reference)
    on_stubs = harness.run_suite([tests], ASSIGNMENT, SEED)
    assert not harness.stub_problems(on_stubs), harness.stub_problems(on_stubs)
    code_tasks = {t.id for t in MANIFEST.tasks if t.kind == "code"}
    assert {t["task"] for t in on_reference["tests"].values()} == code_tasks  # every test has a code task


@pytest.mark.slow
def test_each_mutant_fails_only_its_own_task_and_is_named(one_thread):
    runs = harness.run_mutants("assignment2", MUTANTS, lambda m: [REFERENCE / "tests"], lambda: SEED)
    problems = []
    for mutant in MUTANTS:
        task = MANIFEST.task_for_function(mutant.function).id
        others = {m.id for m in MUTANTS} - {mutant.id}
        problems += harness.mutant_problems(runs[mutant.id], mutant.id, task, not_named_as=others)
    assert not problems, "\n".join(problems)

"""Inputs drawn so that the property a hidden test checks is exercised on every draw.

A test's inputs come from `check.randn` with a fresh seed per run; a mistake must cost the same
points whatever the seed (`grade validate --seeds` names a test whose verdict flips). Where a
random draw exercises the property only sometimes, the test reshapes its draw with one of these.
"""

from __future__ import annotations

import math

import torch


def last_key_raises_the_maximum(q: torch.Tensor, k: torch.Tensor) -> None:
    """Set each kv head's last key so that, for the first query head reading it, the last query's score
    with it beats every earlier key's by 4 (after 1/√d): a causal kernel's last block then raises that
    row's running maximum on every draw, so a kernel that does not rescale is always seen.

    q: [B, H, N, D], k: [B, H_KV, N, D] with H a multiple of H_KV (k changed in place)."""
    n_rep = q.shape[1] // k.shape[1]
    q_last = q[:, ::n_rep, -1, :].float()  # [B, H_KV, D]: the first query head of each group, last row
    best = torch.einsum("bhd,bhnd->bhn", q_last, k[:, :, :-1, :].float()).amax(-1)  # [B, H_KV]
    target = best + 4.0 * math.sqrt(q.shape[-1])
    k[:, :, -1, :] = (q_last * (target / (q_last * q_last).sum(-1)).unsqueeze(-1)).to(k.dtype)


def first_query_sees_two_large_scores(q: torch.Tensor, k: torch.Tensor, top: float = 100.0,
                                      second: float = 99.0) -> None:
    """Make query 0 of batch 0 see scaled scores `top` and `second` (after 1/√d) with keys 0 and 1
    and 0 with every other key, whatever the draw: beyond exp's float32 range unless the row maximum
    is subtracted, and weights (0.731, 0.269, 0, ...) only with the 1/√d scaling, so an overflow or a
    scaling mistake is seen on every seed.

    q: [B, Lq, D], k: [B, Lk, D] with Lk ≥ 3 (both changed in place)."""
    d = q.shape[-1]
    q0 = q[0, 0] / q[0, 0].norm() * 20.0  # [D], |q0| = 20
    k[0, 2:] -= (k[0, 2:] @ q0).unsqueeze(-1) * q0 / q0.dot(q0)  # keys 2.. orthogonal to q0: score 0
    k[0, 0] = q0 * (top * math.sqrt(d) / q0.dot(q0))  # q0·k0 = top·√d
    k[0, 1] = q0 * (second * math.sqrt(d) / q0.dot(q0))
    q[0, 0] = q0

"""Assignment 3, part 1: attention that scales — shared keys and values, local windows, sinks.

Fill in the functions below (tasks gqa, kv_cache, sliding_window, streaming).
Every function must:

* work for float32 and float64, on CPU or CUDA, for contiguous inputs and for
  views (transposes, slices),
* return tensors on the input's device with the input's dtype,
* leave its inputs unchanged (build new tensors; no in-place edits).

Conventions (the same as assignments 1 and 2):

* Boolean masks use True = "this query may attend to this key".
* When there are fewer queries than keys (decoding with a cache), the queries
  are the *last* Lq positions: query i sits at position i' = i + Lk - Lq among
  the keys. Causal masks and windows are aligned bottom-right this way.
* A query row that may see no key at all returns zeros (not NaN).

Not allowed here: `F.scaled_dot_product_attention` and `nn.MultiheadAttention`
(the point is to build these variants yourself). torch's softmax and matrix
products (`@`, `torch.matmul`) are fine.

Run the public tests with `grade check assignment3`, or `pytest tests` in this
folder. Every test fails with NotImplementedError until you start.
"""

from __future__ import annotations

import math  # noqa: F401  (you will probably want math.sqrt)

import torch

# =============================================================================
# Task gqa (§25): several query heads share one key/value head.
# =============================================================================


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Give every query head its key/value head by repeating kv heads in place.

        out[:, h] = x[:, h // n_rep]        for h in 0 .. Hkv·n_rep − 1

    Shapes:
        x:       [B, Hkv, L, D]
        n_rep:   int ≥ 1, query heads per kv head
        returns: [B, Hkv·n_rep, L, D]

    The groups are contiguous: with Hkv = 2 and n_rep = 3 the heads come out as
    kv0, kv0, kv0, kv1, kv1, kv1 (what `torch.repeat_interleave(x, n_rep, dim=1)`
    gives), not kv0, kv1, kv0, kv1, ... (that is `x.repeat`, tiling). Query heads
    0–2 form the first group. Lecture §25.
    """
    raise NotImplementedError("gqa")


def grouped_query_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                            causal: bool = False) -> torch.Tensor:
    """Grouped-query attention: Hq query heads, Hkv shared key/value heads.

        out[:, h] = softmax(q[:, h] k[:, g]ᵀ / √D + mask) v[:, g],     g = h // (Hq / Hkv)

    Shapes:
        q:       [B, Hq, Lq, D]
        k, v:    [B, Hkv, Lk, D]     Hq must be a multiple of Hkv
        returns: [B, Hq, Lq, D]

    Hkv = Hq is ordinary multi-head attention; Hkv = 1 is multi-query attention
    (every query head shares one key/value head). With causal=True, query i (at
    position i' = i + Lk − Lq) sees key j iff j ≤ i' (bottom-right aligned).
    Lecture §25 (sharing keys and values), §13 (causal masks).
    """
    raise NotImplementedError("gqa")


# =============================================================================
# Task kv_cache (§25): how much memory does the cache of keys and values take?
# =============================================================================


def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int, seq_len: int,
                   batch_size: int = 1, bytes_per_value: int = 2) -> int:
    """Bytes needed to cache the keys and values of every layer during generation.

    Each layer stores one key vector and one value vector of head_dim numbers per
    kv head, per token, per sequence of the batch; each number takes
    bytes_per_value bytes (2 for float16/bfloat16, 4 for float32).

    Returns a Python int. Example: 1 layer, 1 kv head, head_dim 4, 3 tokens,
    batch 1, 2 bytes → keys 24 bytes + values 24 bytes = 48. Lecture §25.
    """
    raise NotImplementedError("kv_cache")


# =============================================================================
# Task sliding_window (§26): each query sees only the most recent keys.
# =============================================================================


def sliding_window_mask(n_q: int, n_k: int, window: int, device=None) -> torch.Tensor:
    """Causal sliding-window mask: `window` keys per query, the query's own position included.

        mask[i, j] = 0 ≤ i' − j < window,        i' = i + n_k − n_q

    Shapes: returns bool [n_q, n_k] (on `device`). window ≥ 1.

    So window = 1 lets a query see only itself, window = 3 itself and the two
    keys before it (the Mistral convention; flash-attn's window_size=(window−1, 0)).
    With n_q < n_k the queries are the last n_q positions (bottom-right aligned).
    Lecture §26.
    """
    raise NotImplementedError("sliding_window")


def sliding_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             window: int) -> torch.Tensor:
    """Causal attention in which query i only sees keys j with 0 ≤ i − j < window.

    Shapes:
        q, k, v: [B, H, L, D]
        returns: [B, H, L, D]       scores scaled by 1/√D, as usual

    Memory must grow like L·window, not L²: this is checked with L = 32768, where a
    single L × L float32 matrix would take 4 GiB. Never build the full score matrix
    or the full mask: work on blocks of queries, each against only the keys its
    window can reach, or gather the `window` keys of every query. Lecture §26.
    """
    raise NotImplementedError("sliding_window")


# =============================================================================
# Task streaming (§29): a window plus a few attention sinks.
# =============================================================================


def streaming_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int,
                        n_sinks: int = 4) -> torch.Tensor:
    """Sliding-window attention that always keeps the first n_sinks keys in view.

        query i (at i' = i + Lk − Lq) sees key j iff  j ≤ i'  and  (j < n_sinks  or  i' − j < window)

    Shapes:
        q:       [B, H, Lq, D]
        k, v:    [B, H, Lk, D]       Lq ≤ Lk
        returns: [B, H, Lq, D]       scores scaled by 1/√D

    The first tokens act as attention sinks: trained models park attention there
    when nothing else is relevant, so dropping them from a streaming cache breaks
    the model. A sink is still a key like any other: a query never sees a future
    key, sink or not. Lecture §29 (attention sinks), §26 (windows).
    """
    raise NotImplementedError("streaming")

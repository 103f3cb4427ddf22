"""Assignment 2, part 1: multi-head attention.

Fill in the three functions below (two tasks). Names used throughout:

    B  batch size          L   sequence length (Lq queries, Lk keys)
    H  number of heads     Dh  head size,  d_model = H * Dh

Every function must work for float32 and float64, for contiguous inputs and
for views (transposes, slices), return tensors with the input's dtype and
device, and leave its inputs unchanged.

Boolean masks use True = "this query may attend to this key" (the polarity
of F.scaled_dot_product_attention). nn.MultiheadAttention uses the opposite
polarity for its attn_mask: do not copy it.

Not allowed in multi_head_attention: F.scaled_dot_product_attention and
nn.MultiheadAttention (or F.multi_head_attention_forward). torch.softmax is
fine here: you wrote your own in assignment 1.

Run the public tests with `grade check assignment2`, or `pytest tests` in this
folder. Every test fails with NotImplementedError until you start.
"""

from __future__ import annotations

import math  # noqa: F401  (you will probably want math.sqrt)

import torch

# =============================================================================
# Task heads (§15–§16): cut the model width into heads, and glue it back.
# =============================================================================


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Give each head its own slice of the features.

        out[b, h, t, c] = x[b, t, h*Dh + c]        Dh = x.shape[-1] // n_heads

    Head h owns the contiguous block of columns h*Dh ... (h+1)*Dh - 1 (head 0
    the first Dh columns, head 1 the next Dh, and so on).

    Shapes:
        x:       [B, L, H*Dh]
        returns: [B, H, L, Dh]

    Leading dimensions in front of L are kept as they are, so [L, H*Dh] gives
    [H, L, Dh]. A view (reshape + transpose) is enough: no copy is needed.
    Lecture §15 (why several heads), §16 (each head in its own subspace).
    """
    raise NotImplementedError("heads")


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """Concatenate the heads again: the exact inverse of split_heads.

        out[b, t, h*Dh + c] = x[b, h, t, c]

    Shapes:
        x:       [B, H, L, Dh]
        returns: [B, L, H*Dh]

    Leading dimensions in front of H are kept, as in split_heads.
    merge_heads(split_heads(x, H)) must give back x. Lecture §16.
    """
    raise NotImplementedError("heads")


# =============================================================================
# Task multi_head_attention (§15–§16): H attention heads side by side.
# =============================================================================


def multi_head_attention(x_q: torch.Tensor, x_kv: torch.Tensor, w_q: torch.Tensor,
                         w_k: torch.Tensor, w_v: torch.Tensor, w_o: torch.Tensor, n_heads: int,
                         mask: torch.Tensor | None = None) -> torch.Tensor:
    """Multi-head attention with linear projections and no biases.

        Q = x_q @ w_q.T      K = x_kv @ w_k.T      V = x_kv @ w_v.T     (like nn.Linear)
        head_h = softmax(Q_h K_hᵀ / √Dh + masking) V_h                  for h = 0 .. H-1
        out    = concat(head_0, ..., head_{H-1}) @ w_o.T

    Q_h is the h-th contiguous block of Dh columns of Q (the layout of
    split_heads), and concat puts head h's output back in that same block.
    Scale by 1/√Dh, the head size, not by 1/√d_model.

    Self-attention is the call with x_kv = x_q; in cross-attention the keys and
    values come from another sequence, so Lk may differ from Lq.

    Shapes:
        x_q:            [B, Lq, d_model]
        x_kv:           [B, Lk, d_model]
        w_q, w_k, w_v:  [d_model, d_model]   (out_features, in_features), as in nn.Linear
        w_o:            [d_model, d_model]
        mask:           bool, True = may attend; broadcastable to [B, H, Lq, Lk]
                        (e.g. [Lq, Lk] for one causal mask, [B, 1, 1, Lk] for padding).
                        Every query keeps at least one key in the tests.
        returns:        [B, Lq, d_model]

    This equals torch.nn.MultiheadAttention(d_model, H, bias=False,
    batch_first=True) with in_proj_weight = cat([w_q, w_k, w_v]) and
    out_proj.weight = w_o, given attn_mask = ~mask (its polarity is the
    opposite of ours). Lecture §15, §16; §12 (self vs cross), §13 (masking).
    """
    raise NotImplementedError("multi_head_attention")

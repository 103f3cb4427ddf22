"""Wrapper: HF Mistral's eager_attention_forward (HF's modular copy of Llama's) as grouped_query_attention.

HF hands its attention function the module (only num_key_value_groups and training are read),
the scale head_dim**-0.5, and the additive mask the model builds with its own
_prepare_4d_causal_attention_mask_with_cache_position: the new queries sit at
cache_position = past_seen_tokens … past_seen_tokens + Lq − 1, after the Lk − Lq cached keys,
and with no padding mask the model asks for past_seen_tokens + Lq + 1 key columns (eager
attention slices them to Lk). Its output is [B, Lq, Hq, D]; the course's is [B, Hq, Lq, D].
"""

import types

import torch
from corpus_hf_mistral_eager_gqa import _prepare_4d_causal_attention_mask_with_cache_position, eager_attention_forward
from corpus_hf_mistral_eager_gqa import repeat_kv as hf_repeat_kv  # noqa: F401  (bound to repeat_kv by run.py)


def hf_grouped_query_attention(q, k, v, causal=False):
    module = types.SimpleNamespace(num_key_value_groups=q.shape[1] // k.shape[1], training=False)
    mask = None
    if causal:
        n_q, past_seen_tokens = q.shape[-2], k.shape[-2] - q.shape[-2]
        mask = _prepare_4d_causal_attention_mask_with_cache_position(
            None, sequence_length=n_q, target_length=past_seen_tokens + n_q + 1, dtype=q.dtype, device=q.device,
            cache_position=torch.arange(past_seen_tokens, past_seen_tokens + n_q, device=q.device),
            batch_size=q.shape[0], config=types.SimpleNamespace(sliding_window=None), past_key_values=None)
    out, _ = eager_attention_forward(module, q, k, v, mask, scaling=q.shape[-1] ** -0.5)  # [B, Lq, Hq, D]
    return out.transpose(1, 2)  # [B, Hq, Lq, D]

"""Wrapper: Mistral's reference repeat_kv (keys and values together, [B, L, H, D]) as the course's repeat_kv."""

from corpus_mistral_ref_repeat_kv import repeat_kv as mistral_repeat_kv_pair


def mistral_repeat_kv(x, n_rep):
    seq_first = x.transpose(1, 2)  # [B, L, Hkv, D]: Mistral's layout, heads on dim 2
    keys, _ = mistral_repeat_kv_pair(seq_first, seq_first, n_rep)  # [B, L, Hkv·n_rep, D]
    return keys.transpose(1, 2)  # [B, Hkv·n_rep, L, D]

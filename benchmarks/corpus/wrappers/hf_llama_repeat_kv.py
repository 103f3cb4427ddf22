"""Wrapper: HF Llama's repeat_kv, already the course's name and layout [B, Hkv, L, D]."""

from corpus_hf_llama_repeat_kv import repeat_kv as hf_repeat_kv  # noqa: F401  (bound to repeat_kv by run.py)

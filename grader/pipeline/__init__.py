"""Orchestration: one grade, a batch, validation, and the sandbox policy."""

"""Orchestration: one grade, a class (a batch), staff decisions, and the sandbox policy."""

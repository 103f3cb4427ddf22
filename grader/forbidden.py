"""Forbidden APIs, statically: which dotted names and attributes reveal each group.

The run-time side of the same groups is `grader.sandbox.facts.FORBIDDEN_FUNCTIONS`.
"""

from __future__ import annotations

GROUP_NAMES: dict[str, str] = {
    "softmax": "torch's softmax family (softmax, log_softmax, softmin, nn.Softmax)",
    "sdpa": "torch.nn.functional.scaled_dot_product_attention",
    "multihead_attention": "torch.nn.MultiheadAttention",
    "matmul": "torch matrix products (matmul, @, bmm, mm, einsum) on the full problem",
}

# Fully qualified names (after resolving import aliases).
DOTTED: dict[str, frozenset[str]] = {
    "softmax": frozenset({
        "torch.softmax", "torch.log_softmax", "torch._softmax", "torch._log_softmax",
        "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
        "torch.nn.functional.softmin", "torch.special.softmax", "torch.special.log_softmax",
        "torch.nn.Softmax", "torch.nn.LogSoftmax", "torch.nn.Softmin", "torch.nn.Softmax2d",
        "torch._C._nn.softmax", "torch._C._VariableFunctions.softmax",
    }),
    "sdpa": frozenset({
        "torch.nn.functional.scaled_dot_product_attention",
        "torch._C._nn.scaled_dot_product_attention",
        "torch.nn.attention.sdpa_kernel",
    }),
    "multihead_attention": frozenset({
        "torch.nn.MultiheadAttention", "torch.nn.modules.activation.MultiheadAttention",
        "torch.nn.functional.multi_head_attention_forward",
    }),
    "matmul": frozenset({
        "torch.matmul", "torch.bmm", "torch.mm", "torch.einsum", "torch.baddbmm", "torch.addmm",
        "torch.tensordot", "torch.nn.functional.linear", "torch.inner", "torch.mv",
    }),
}

# Attribute names that give a group away whatever object they are read from
# (x.softmax(...), F.softmax, getattr(F, "softmax")).
ATTRIBUTES: dict[str, frozenset[str]] = {
    "softmax": frozenset({"softmax", "log_softmax", "softmin", "_softmax", "_log_softmax",
                          "Softmax", "LogSoftmax"}),
    "sdpa": frozenset({"scaled_dot_product_attention"}),
    "multihead_attention": frozenset({"MultiheadAttention", "multi_head_attention_forward"}),
    "matmul": frozenset({"matmul", "bmm", "mm", "einsum", "baddbmm", "tensordot", "__matmul__"}),
}

from __future__ import annotations

import pytest

from grader.manifest import parse_manifest
from grader.static_checks import check_sources

MANIFEST = parse_manifest({"id": "a", "files": ["a.py"], "tasks": [
    {"id": "soft", "points": 1, "functions": ["softmax"], "forbidden": ["softmax"]},
    {"id": "attn", "points": 1, "functions": ["attend"], "forbidden": ["softmax", "sdpa"]},
    {"id": "flash", "points": 1, "functions": ["flash"], "forbidden": ["matmul"]},
]})


def groups(source: str) -> set[tuple[str, str]]:
    findings, problems = check_sources(MANIFEST, {"a.py": source})
    assert not problems
    return {(f.task, f.group) for f in findings}


@pytest.mark.parametrize("source", [
    "import torch\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim)\n",
    "import torch\ndef softmax(x, dim=-1):\n    return x.softmax(dim)\n",
    "import torch.nn.functional as F\ndef softmax(x, dim=-1):\n    return F.softmax(x, dim)\n",
    "from torch.nn.functional import softmax as s\ndef softmax(x, dim=-1):\n    return s(x, dim)\n",
    "import torch\nsm = torch.softmax\ndef softmax(x, dim=-1):\n    return sm(x, dim)\n",
    "import torch\ndef softmax(x, dim=-1):\n    return getattr(torch, 'log_softmax')(x, dim).exp()\n",
    "import torch\ndef softmax(x, dim=-1):\n    return torch.nn.Softmax(dim)(x)\n",
])
def test_softmax_in_every_disguise(source):
    assert ("soft", "softmax") in groups(source)


def test_helper_functions_do_not_hide_a_forbidden_call():
    source = ("import torch\n"
              "def _helper(s):\n    return torch.softmax(s, -1)\n"
              "def attend(q, k):\n    return _helper(q @ k.T)\n")
    assert groups(source) == {("attn", "softmax")}


def test_own_softmax_is_allowed():
    source = ("import torch\n"
              "def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
              "    return e / e.sum(dim, keepdim=True)\n"
              "def attend(q, k):\n    return softmax(q @ k.T)\n")
    assert groups(source) == set()


def test_sdpa_found():
    source = ("import torch.nn.functional as F\n"
              "def attend(q, k):\n    return F.scaled_dot_product_attention(q, k, k)\n")
    assert groups(source) == {("attn", "sdpa")}


def test_matmul_outside_kernels_only():
    source = ("import torch\nimport triton\nimport triton.language as tl\n"
              "@triton.jit\ndef _kernel(a, b):\n    c = a @ b\n"
              "def flash(q, k):\n    _kernel[(1,)](q, k)\n    return q\n")
    assert groups(source) == set()
    assert groups("import torch\ndef flash(q, k):\n    return q @ k.transpose(-2, -1)\n") == {("flash", "matmul")}
    einsum = "import torch\ndef flash(q, k):\n    return torch.einsum('id,jd->ij', q, k)\n"
    assert groups(einsum) == {("flash", "matmul")}


def test_syntax_errors_are_reported_not_raised():
    findings, problems = check_sources(MANIFEST, {"a.py": "def softmax(x)\n  return x\n"})
    assert findings == [] and problems and "line 1" in problems[0].message

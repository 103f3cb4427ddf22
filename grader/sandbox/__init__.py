"""The sandbox: the only place student code ever runs.

`client.Sandbox` (trusted side) starts `worker.py` in a separate process with
limits and, where bubblewrap works, its own namespaces; they talk over a
private pipe with tensors serialised by `torch.save` and read back with
`torch.load(weights_only=True)`. Nothing here knows about points or tests.

This package must import only the standard library and torch (and triton when
present): it is the one part of the grader that is mounted into the worker.
"""

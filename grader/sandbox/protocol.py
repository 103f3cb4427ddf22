"""Framing of the private pipe between the trusted process and the worker.

Each message is an 8-byte big-endian length followed by a `torch.save` payload
of plain containers, numbers, strings and tensors. Both sides read with
`weights_only=True`, so a message can never execute code when loaded.
"""

from __future__ import annotations

import io
import os
import select
import struct
import time

import torch

HEADER = struct.Struct(">Q")
MAX_MESSAGE_BYTES = 2 << 30  # 2 GiB: what the worker accepts from the trusted side
MAX_REPLY_BYTES = 256 << 20  # 256 MiB: what the trusted side accepts from the worker (its memory)
MAX_DEPTH = 32  # nesting of containers in a reply
MAX_ITEMS = 100_000  # values in a reply


class ProtocolError(Exception):
    """The other side sent something that is not a valid message."""


class ChannelClosed(ProtocolError):
    """The other side is gone (end of file on the pipe)."""


class DeadlinePassed(ProtocolError):
    """The other side did not finish a message in time (it may have stopped half-way)."""


def encode(message: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(message, buffer)
    payload = buffer.getvalue()
    return HEADER.pack(len(payload)) + payload


def decode(payload: bytes) -> object:
    try:
        return torch.load(io.BytesIO(payload), weights_only=True, map_location=None)
    except Exception as exc:  # a refused unpickle is a protocol violation, never code execution
        raise ProtocolError(f"unreadable message: {type(exc).__name__}: {exc}") from None


def _wait(fd: int, deadline: float | None, write: bool = False) -> None:
    """Block until `fd` is ready, or raise DeadlinePassed at `deadline` (time.monotonic)."""
    if deadline is None:
        return
    left = deadline - time.monotonic()
    readers, writers = ([], [fd]) if write else ([fd], [])
    if left <= 0 or not any(select.select(readers, writers, [], left)):
        raise DeadlinePassed("the other side did not keep up before the deadline")


def write_message(fd: int, message: object, deadline: float | None = None) -> None:
    """Write one message; with a deadline `fd` must be non-blocking (a reader that stops reading
    then costs at most the time left, never a hang)."""
    data = memoryview(encode(message))
    while data:
        _wait(fd, deadline, write=True)
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            continue
        data = data[written:]


def read_exactly(fd: int, size: int, deadline: float | None = None) -> bytes:
    chunks = []
    remaining = size
    while remaining:
        _wait(fd, deadline)
        try:
            chunk = os.read(fd, min(remaining, 1 << 20))
        except BlockingIOError:
            continue
        if not chunk:
            raise ChannelClosed("pipe closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int, deadline: float | None = None, max_bytes: int = MAX_MESSAGE_BYTES) -> object:
    """One whole message before `deadline`, no larger than `max_bytes`."""
    (size,) = HEADER.unpack(read_exactly(fd, HEADER.size, deadline))
    if size > max_bytes:
        raise ProtocolError(f"message of {size} bytes refused (at most {max_bytes})")
    message = decode(read_exactly(fd, size, deadline))
    check_value(message, max_bytes)
    return message


def check_value(value: object, max_bytes: int) -> None:
    """Refuse a decoded message whose tensors claim more memory than the message may hold
    (an expanded or zero-stride tensor can claim 10^12 elements from one), or that nests too
    deep or holds too many values for the trusted side to walk."""
    budget = [max_bytes, MAX_ITEMS]

    def walk(item: object, depth: int) -> None:
        budget[1] -= 1
        if depth > MAX_DEPTH or budget[1] < 0:
            raise ProtocolError("message nests too deep or holds too many values")
        if isinstance(item, torch.Tensor):
            budget[0] -= item.numel() * item.element_size()
            if budget[0] < 0:
                raise ProtocolError("message holds tensors larger than its size allows")
        elif isinstance(item, (list, tuple)):
            for element in item:
                walk(element, depth + 1)
        elif isinstance(item, dict):
            for key, element in item.items():
                walk(key, depth + 1)
                walk(element, depth + 1)

    walk(value, 0)

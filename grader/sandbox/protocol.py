"""Framing of the private pipe between the trusted process and the worker.

Each message is an 8-byte big-endian length followed by a `torch.save` payload
of plain containers, numbers, strings and tensors. Both sides read with
`weights_only=True`, so a message can never execute code when loaded.
"""

from __future__ import annotations

import io
import os
import struct

import torch

HEADER = struct.Struct(">Q")
MAX_MESSAGE_BYTES = 2 << 30  # 2 GiB: anything larger is refused, not read


class ProtocolError(Exception):
    """The other side sent something that is not a valid message."""


class ChannelClosed(ProtocolError):
    """The other side is gone (end of file on the pipe)."""


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


def write_message(fd: int, message: object) -> None:
    data = memoryview(encode(message))
    while data:
        written = os.write(fd, data)
        data = data[written:]


def read_exactly(fd: int, size: int) -> bytes:
    chunks = []
    remaining = size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise ChannelClosed("pipe closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int) -> object:
    (size,) = HEADER.unpack(read_exactly(fd, HEADER.size))
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {size} bytes refused")
    return decode(read_exactly(fd, size))

"""Lossless compression of the big buffers that cross ranks as messages (``scheme.compress``).

A cluster whose network is slower than a core's lz4 (about 0.5-2 GB/s each way) moves a
rollout of Atari frames faster compressed: the frames are mostly background. A
:class:`Codec` turns a fixed-size buffer into the bytes a message carries and back:

* :class:`PlainCodec` (``none``): the buffer itself, received in place, no copy at all;
* :class:`Lz4Codec` (``lz4``): an lz4 block of the buffer's bytes, its length in the first 8
  bytes, received into a wire buffer sized for the worst case and decompressed from there.

Senders call :meth:`Codec.pack` and keep what it returns until the send completes;
receivers post their receive into :meth:`Codec.wire` and call :meth:`Codec.unpack` once it
completed. Shared memory within a node is never compressed: nothing is copied there to save.
"""
from __future__ import annotations

import numpy as np

LENGTH_BYTES = 8  # an lz4 message starts with the compressed length (int64)


def lz4_problem() -> str | None:
    """Why ``scheme.compress=lz4`` cannot run here (the lz4 package missing), or None."""
    try:
        import lz4.block  # noqa: F401
    except ImportError:
        return ("config key 'scheme.compress' is 'lz4', but the lz4 package is not installed; "
                "pip install 'hpcrl[lz4]' (or lz4), or set scheme.compress=none")
    return None


def _bytes_of(array: np.ndarray) -> np.ndarray:
    return array.reshape(-1).view(np.uint8)


class PlainCodec:
    """No compression: messages carry the buffer itself."""

    name = "none"

    def pack(self, array: np.ndarray) -> np.ndarray:
        """What to send for ``array`` (kept by the caller until the send completes)."""
        return array

    def wire(self, array: np.ndarray) -> np.ndarray:
        """The buffer to receive ``array``'s message into."""
        return array

    def unpack(self, wire: np.ndarray, array: np.ndarray) -> None:
        """After the receive into ``wire`` completed: ``array`` holds the message."""


class Lz4Codec(PlainCodec):
    """lz4 block compression; each receiving buffer gets a wire buffer of its own."""

    name = "lz4"

    def __init__(self) -> None:
        import lz4.block

        self.block = lz4.block

    @staticmethod
    def bound(nbytes: int) -> int:
        """The most bytes an lz4 message of an ``nbytes`` buffer takes (lz4's own bound)."""
        return LENGTH_BYTES + nbytes + nbytes // 255 + 16

    def pack(self, array: np.ndarray) -> np.ndarray:
        """``array``'s bytes as one lz4 block, its compressed length in the first 8 bytes."""
        packed = self.block.compress(_bytes_of(array), store_size=False)
        out = np.empty(LENGTH_BYTES + len(packed), np.uint8)
        out[:LENGTH_BYTES].view(np.int64)[0] = len(packed)
        out[LENGTH_BYTES:] = np.frombuffer(packed, np.uint8)
        return out

    def wire(self, array: np.ndarray) -> np.ndarray:
        """A fresh uint8 buffer of :meth:`bound` bytes: room for ``array``'s worst-case message."""
        return np.empty(self.bound(array.nbytes), np.uint8)

    def unpack(self, wire: np.ndarray, array: np.ndarray) -> None:
        """Decompress the lz4 block received into ``wire`` into ``array``'s bytes."""
        length = int(wire[:LENGTH_BYTES].view(np.int64)[0])
        plain = self.block.decompress(wire[LENGTH_BYTES:LENGTH_BYTES + length].data,
                                      uncompressed_size=array.nbytes)
        _bytes_of(array)[:] = np.frombuffer(plain, np.uint8)


def make_codec(name: str) -> PlainCodec:
    """The codec of ``scheme.compress``."""
    if name == "lz4":
        return Lz4Codec()
    if name != "none":
        raise ValueError(f"unknown compression {name!r}: use 'none' or 'lz4'")
    return PlainCodec()

"""scheme.compress: the lz4 codec gives back every byte, and refuses clearly without lz4."""
import numpy as np
import pytest

from hpcrl.comm.compression import LENGTH_BYTES, Lz4Codec, PlainCodec, make_codec
from hpcrl.config import ConfigError, load_config


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_lz4_gives_back_every_byte_of_a_buffer(dtype):
    rng = np.random.default_rng(0)
    frames = np.zeros((64, 84, 84), np.uint8)  # mostly background, like Atari frames
    frames[:, 30:40, 10:20] = rng.integers(0, 255, (64, 10, 10))
    array = frames.reshape(-1).view(np.float32) if dtype == np.float32 else frames.reshape(-1)
    codec = Lz4Codec()
    payload = codec.pack(array)
    assert payload.nbytes < array.nbytes / 10  # the background compresses
    wire = codec.wire(array)
    assert wire.nbytes >= payload.nbytes
    wire[:payload.nbytes] = payload
    out = np.full_like(array, 7)
    codec.unpack(wire, out)
    assert np.array_equal(out.view(np.uint8), array.view(np.uint8))


def test_lz4_bounds_the_worst_case_and_plain_sends_the_buffer_itself():
    noise = np.random.default_rng(1).integers(0, 255, 100_000).astype(np.uint8)
    codec = Lz4Codec()
    payload = codec.pack(noise)  # incompressible: a little larger than the buffer
    assert noise.nbytes < payload.nbytes <= codec.bound(noise.nbytes)
    assert int(payload[:LENGTH_BYTES].view(np.int64)[0]) == payload.nbytes - LENGTH_BYTES
    plain = make_codec("none")
    assert isinstance(plain, PlainCodec) and plain.pack(noise) is noise
    assert plain.wire(noise) is noise


def test_compress_needs_lz4_and_says_how_to_get_it(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_lz4(name, *args, **kw):
        if name.startswith("lz4"):
            raise ImportError("No module named 'lz4'")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_lz4)
    with pytest.raises(ConfigError, match=r"pip install 'hpcrl\[lz4\]'"):
        load_config(None, ["scheme.preset=a2c", "scheme.compress=lz4"])
    assert load_config(None, ["scheme.preset=a2c"]).scheme.compress == "none"

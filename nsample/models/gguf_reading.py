"""A GGUF file's first load, made fast: gguf-py's reader with plain-array slices, and one reader per file for the
whole load.

A first load reads the file's metadata several times over: nsample's tensor index, then transformers' config,
tokenizer and name map, each of which builds its own `gguf.GGUFReader` and parses every field again (a 49k-token
vocabulary is some 150k strings, each sliced out of a `np.memmap`, whose every slice is a new memmap). On the 1.1B
Q4_K_M fixture a first load took 13 s; with `shared_reading()` 3.8 s, the same files written.
"""
import functools
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from gguf import GGUFReader


class FastReader(GGUFReader):
    """gguf-py's reader, its fields and tensors sliced from a plain ndarray view of the same mapping: the values are
    the same, read 3-4x faster (a memmap slice costs a memmap's construction; a plain one a view's)."""

    def _get(self, offset, dtype, count=1, override_order=None):
        plain = self.__dict__.get("_plain")
        if plain is None:
            plain = self._plain = self.data.view(np.ndarray)
        count, dtype = int(count), np.dtype(dtype)
        arr = plain[offset:offset + dtype.itemsize * count].view(dtype)[:count]
        return arr.view(arr.dtype.newbyteorder(self.byte_order if override_order is None else override_order))


_lock = threading.RLock()
_active = None  # the reader function of the block in progress


@contextmanager
def shared_reading():
    """Within: `gguf.GGUFReader(path)` is one FastReader per file (the block yields that function), and
    `gguf.get_tensor_name_map(arch, layers)` is built once per (arch, layers) (transformers builds it again for every
    submodule of the model: 293 times, 3.4 s, for a 22-layer Llama). transformers imports both from `gguf` when it
    calls them, so it gets these. Loads in other threads wait for the block to end; nested blocks share the outer
    one's readers."""
    import gguf

    global _active
    with _lock:
        if _active is not None:
            yield _active
            return
        readers: dict[str, FastReader] = {}

        def reader(path, mode="r"):
            key = f"{Path(path).resolve()}:{mode}"
            if key not in readers:
                readers[key] = FastReader(path, mode)
            return readers[key]

        saved = gguf.GGUFReader, gguf.get_tensor_name_map
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(saved[1])
        _active = reader
        try:
            yield reader
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = saved
            _active = None

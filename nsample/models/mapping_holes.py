"""Holes in a mapped file where its bytes were copied and are never read through the mapping again.

A mapped file's pages count in the process's memory once a read faults them in, and Linux may map more than the page
read: up to 16 cached pages around it (fault-around), or the whole large folio the page cache holds it in, which a
file written in large pieces (a download, `pip install`) has, up to 2 MiB of the file at a time. So a tensor copied at
load (Llama's q and k, reordered) would have its mapped pages in memory beside the copy, whichever way the copy was
read, as soon as a neighbour of it is read. `punch` maps empty, inaccessible anonymous memory over the whole pages of
such ranges (MAP_FIXED): they stay reserved in the mapping's address range, cost nothing, and are never faulted in;
the mapping's own unmap, when its last view goes, unmaps them with it. A read of one would crash, so only ranges that
no tensor views may be given.
"""
import ctypes
import mmap
import os

MAP_FIXED, PROT_NONE = 0x10, 0  # Linux's and macOS's (Python's mmap module exports neither)


def punch(base: int, ranges: list[tuple[int, int]]) -> int:
    """Holes over the whole pages of each (offset, nbytes) range of the mapping at address `base`; the pages made holes
    (none where the platform has no POSIX mmap)."""
    if os.name != "posix":
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    page, count = mmap.PAGESIZE, 0
    for offset, nbytes in ranges:
        start, end = -(-(base + offset) // page) * page, (base + offset + nbytes) // page * page
        if end <= start:
            continue
        got = libc.mmap(start, end - start, PROT_NONE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_FIXED, -1, 0)
        if got != start:
            error = ctypes.get_errno()
            raise OSError(error, f"a hole of {end - start} bytes in the mapped file: {os.strerror(error)}")
        count += (end - start) // page
    return count

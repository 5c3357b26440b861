"""mapping_holes.punch: the whole pages of a copied range of a mapped file never come into memory again, its
neighbours read as before, and the mapping unmaps cleanly with its holes."""
import mmap
import os

import numpy as np
import pytest
import torch

from nsample.models import mapping_holes

PAGE = mmap.PAGESIZE
pytestmark = [pytest.mark.skipif(not os.path.exists("/proc/self/pagemap"), reason="Linux's page map shows the holes"),
              pytest.mark.filterwarnings("ignore:The given NumPy array is not writable")]  # a read-only mapping


def present(address: int, pages: int) -> np.ndarray:
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(8 * (address // PAGE))
        entries = np.frombuffer(f.read(8 * pages), dtype=np.uint64)
    return ((entries >> np.uint64(63)) & np.uint64(1)).astype(bool)


def test_a_hole_is_never_faulted_in_and_its_neighbours_read_as_before(tmp_path):
    path = tmp_path / "file.bin"
    content = np.random.default_rng(0).integers(0, 256, 64 * PAGE, dtype=np.uint8)
    content.tofile(path)  # one large write: the page cache may hold it in large folios, mapped whole on a fault
    data = torch.from_numpy(np.memmap(path, dtype=np.uint8, mode="r"))
    base = data.data_ptr()
    start, nbytes = 10 * PAGE + 100, 20 * PAGE  # pages 11 to 29 are wholly inside, 10 and 30 shared with neighbours
    assert mapping_holes.punch(base, [(start, nbytes), (40 * PAGE + 1, PAGE - 2)]) == 19  # the second has no whole page
    assert int(data[:11 * PAGE].sum()) == int(content[:11 * PAGE].sum())  # the neighbours, the shared pages included
    assert int(data[30 * PAGE:].sum()) == int(content[30 * PAGE:].sum())
    assert not present(base + 11 * PAGE, 19).any()
    assert present(base, 11).all() and present(base + 30 * PAGE, 34).all()
    del data  # numpy's mmap unmaps its whole range, the holes with it


def test_no_hole_where_a_range_has_no_whole_page(tmp_path):
    path = tmp_path / "file.bin"
    np.zeros(4 * PAGE, dtype=np.uint8).tofile(path)
    data = torch.from_numpy(np.memmap(path, dtype=np.uint8, mode="r"))
    assert mapping_holes.punch(data.data_ptr(), [(PAGE // 2, PAGE), (3 * PAGE, 0)]) == 0
    assert int(data.sum()) == 0

"""The model cache prunes what no lookup can find again (nsample/models/model_cache.py): entries made from a file
that has since changed or gone, and only those."""
import json
import os

import tiny_gguf

from nsample.models import gguf_model, model_cache

F16 = 1  # ggml's type id


def test_an_entry_records_its_file_and_goes_when_the_file_changes_or_goes(tmp_path):
    cache, files = tmp_path / "cache", tmp_path / "files"
    files.mkdir()
    a, b = (tiny_gguf.write(files / f"{name}.gguf", F16, layers=1) for name in "ab")
    a_entry = gguf_model.metadata(a, cache)
    assert json.loads((a_entry / model_cache.SOURCE).read_text()) == {"path": str(a.resolve()),
                                                                    "key": model_cache.key(a)}
    foreign = cache / "someone-elses"  # no record: left alone, as are entries being made (dot folders)
    foreign.mkdir()
    (cache / ".tmp-making").mkdir()
    b_entry = gguf_model.metadata(b, cache)
    assert a_entry.is_dir()  # a unchanged: its entry stays

    stat = a.stat()
    os.utime(a, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a changed: its key, so its lookups, are new
    a_again = gguf_model.metadata(a, cache)
    assert a_again != a_entry and not a_entry.exists() and a_again.is_dir() and b_entry.is_dir()

    b.unlink()  # b gone: nothing can ask for its entry
    assert model_cache.prune(cache) == [b_entry]
    assert sorted(p.name for p in cache.iterdir()) == sorted([a_again.name, "someone-elses", ".tmp-making"])


def test_a_broken_record_is_left_alone(tmp_path):
    entry = tmp_path / "x-0123456789ab-gguf"
    entry.mkdir()
    (entry / model_cache.SOURCE).write_text("{not json")
    assert not model_cache.stale(entry) and model_cache.prune(tmp_path) == [] and entry.is_dir()

"""The cache of what nsample makes from model files (cache_dir()): a GGUF's float32 conversion
(model_loader.converted_gguf) and its metadata folder (gguf_model.metadata), each named by the file's stem and
`key`, a hash of its resolved path, size and modification time.

So a file that changes or goes (a reinstalled package's GGUF, a test's temporary one) leaves entries that nothing will
ask for again: 517 MB for the embedded model's conversion, each time the package is installed anew. Each entry
records the file it was made from (SOURCE); making an entry removes those whose file is gone or has another key now.
Entries without a record (an older nsample's, or other folders) are left alone. No torch here."""
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

SOURCE = "nsample_source.json"


def key(path: Path) -> str:
    """The cache key of a model file: its resolved path, size and modification time (raises OSError if it is gone)."""
    stat = path.stat()
    return hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]


def record(folder: Path, path: Path) -> None:
    """Write into `folder`, an entry before it is moved into place, the file it is made from."""
    (folder / SOURCE).write_text(json.dumps({"path": str(path.resolve()), "key": key(path)}))


def make(target: Path, source: Path, marker: str, write) -> Path:
    """The entry `target`, made from the file `source` by write(folder): written into a temporary folder beside it,
    recorded, then moved into place at once; where another process moved its own there first (it has `marker`), that
    one stays. Then the stale entries go."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        write(tmp)
        record(tmp, source)
        os.replace(tmp, target)
    except OSError:
        if not (target / marker).is_file():  # not another process winning the race
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    prune(target.parent)
    return target


def stale(entry: Path) -> bool:
    """Whether `entry` records a file that is gone or changed since: then no lookup can find it again."""
    try:
        source = json.loads((entry / SOURCE).read_text())
        made_from, made_key = Path(source["path"]), source["key"]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # no record: not ours to judge
    try:
        return key(made_from) != made_key
    except OSError:
        return True


def prune(cache: Path) -> list[Path]:
    """Remove the stale entries of `cache` (not those being made: their temporary folders start with a dot); the
    removed ones."""
    removed = []
    for entry in sorted(cache.iterdir()) if cache.is_dir() else []:
        if entry.is_dir() and not entry.name.startswith(".") and stale(entry):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed

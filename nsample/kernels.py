"""nsample's C++ kernels (`csrc/`), built once per machine with torch's cpp_extension; None where they cannot be.

- int8_rows.cpp: the float work around the two-level int8 GEMM (int8_linear.py). Each Int8Linear call rounds its
  activation rows to two int8 levels before the GEMM and combines the four level products after it; in ATen
  that is about fifteen small ops per call, 121 calls per decode step, and on a 2-core CPU they cost more than
  the GEMM itself (o_proj at 8 rows: 121 µs a call, 35 µs of it the GEMM). The kernels do the same arithmetic,
  bitwise, in two calls (70 µs).
- block_rows.cpp: decode on a GGUF's own 4- and 8-bit blocks (gguf_blocks.py), float32 sums, AVX-512.
- linear.cpp: a decode-time linear layer of either kind; decode_layer.cpp: the rest of a Llama-style layer's decode
  step around it (fused_decode.py).
They are compiled (g++ and ninja, about 80 s on 2 cores) the first time a quantized model loads, into
$TORCH_EXTENSIONS_DIR (else ~/.cache/torch_extensions), keyed by torch version; later loads take the built library.
Without a compiler, on a CPU without AVX2, or with NSAMPLE_NO_CPP=1, the ATen ops in int8_linear.py run instead
and decode stays on int8.
"""
import hashlib
import logging
import os
import shutil
import threading
from pathlib import Path

import torch

log = logging.getLogger(__name__)
CSRC = Path(__file__).with_name("csrc")
SOURCES = [CSRC / f for f in ("bindings.cpp", "int8_rows.cpp", "block_rows.cpp", "linear.cpp", "decode_layer.cpp")]
FLAGS = ["-O3", "-fopenmp", "-mavx2", "-mfma",  # quantized paths run only on CPUs with AVX2 and FMA (VNNI ones)
         "-ffp-contract=off"]  # no fused multiply-adds but the written ones: the same roundings as the ATen ops
_lock = threading.Lock()
_built: dict[str, object] = {}  # "ops": the extension module, or None where it could not be built


def ops():
    """The built extension (csrc/bindings.cpp lists its functions), or None: disabled, or it could not be built."""
    if "ops" not in _built:
        with _lock:
            if "ops" not in _built:
                usable = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")  # compiled for AVX2
                _built["ops"] = None if os.environ.get("NSAMPLE_NO_CPP") or not usable else _build()
    return _built["ops"]


def _build():
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR", Path.home() / ".cache" / "torch_extensions"))
    where = root / f"nsample_kernels-torch{torch.__version__.replace('+', '-')}"
    try:
        from torch.utils.cpp_extension import load

        _ninja_on_path()
        where.mkdir(parents=True, exist_ok=True)
        if not any(where.glob("*.so")):
            log.warning("building nsample's C++ kernels into %s (once, about a minute)", where)
        headers = hashlib.sha256(b"".join(h.read_bytes() for h in sorted(CSRC.glob("*.h")))).hexdigest()[:16]
        return load(name="nsample_kernels", sources=[str(s) for s in SOURCES], build_directory=str(where),
                    extra_cflags=FLAGS + [f"-DNSAMPLE_HEADERS={headers}"],  # torch rebuilds on changed sources or
                    verbose=False)  # flags, not headers: their hash is a flag
    except Exception as e:  # noqa: BLE001 - no compiler, no ninja, a read-only home: the ATen ops still work
        log.warning("nsample's C++ kernels could not be built (%s); using ATen ops, which are slower", e)
        return None


def _ninja_on_path() -> None:
    """torch runs `ninja` from PATH; a virtualenv's pip-installed ninja is not on it unless the venv is active."""
    if shutil.which("ninja") is None:
        try:
            import ninja
        except ImportError:
            return
        os.environ["PATH"] = os.pathsep.join([ninja.BIN_DIR, os.environ.get("PATH", "")])

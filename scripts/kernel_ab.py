"""In-process A/B of the GGUF decode kernel: two or more builds of nsample/cpu/csrc (each a directory, e.g. a
`git archive` of a commit's nsample/cpu/csrc) timed on the same random blocks, shape by shape and row count by row
count, for seven rounds; each build's median time, and its ratio to the first build's.

The builds' order turns each round: the build timed first in a round was seen to take up to 10% longer at one row,
whichever it was (docs/benchmarks.md, stop 40). The weights are cycled through --copies copies, so that with 8 they
stream from memory as in a decode step. A build's extra compiler flags go in EXTRA_<name>, its compiler in CXX_<name>
(else $CXX, else c++). --kernel int8 times the int8-activation kernel (gguf_decode_q8_linear) instead of the float32.
Usage: python scripts/kernel_ab.py --isa avx2 --rows 1 8 --threads 2 [--copies 8] \
           [--shapes 12x5632x2048 14x2048x5632] --builds old=/tmp/old/nsample/cpu/csrc new=nsample/cpu/csrc
A shape is TYPExNxK, TYPE a ggml type id: 0 F32, 1 F16, 30 BF16, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 10 Q2_K,
11 Q3_K, 12 Q4_K, 13 Q5_K, 14 Q6_K, 16 IQ2_XXS, 17 IQ2_XS, 18 IQ3_XXS, 19 IQ1_S, 20 IQ4_NL, 21 IQ3_S, 22 IQ2_S,
23 IQ4_XS, 29 IQ1_M, 39 MXFP4.
"""
import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from torch.utils.cpp_extension import load

from nsample.cpu import kernels
from nsample.cpu.instruction_sets import ISA_FLAGS

SCALES = {2: (0,), 8: (0,), 6: (0,), 3: (0, 2), 7: (0, 2), 10: (80, 82), 11: (108,), 12: (0, 2), 13: (0, 2),
          14: (208,), 16: (0,), 17: (0,), 18: (0,), 19: (0,), 20: (0,), 21: (0,), 22: (0,), 23: (0,),
          29: (), 39: ()}  # fp16 scale offsets (IQ1_M's d is the top nibbles of its scales, left random)
PLAIN = {0: torch.float32, 1: torch.float16, 30: torch.bfloat16}  # F32, F16, BF16 rows (hub models' checkpoint rows)
E8M0 = {39: 0}  # MXFP4's scale byte, a power of two: set to 2^-8 (random bytes reach 2^127)


def build(name: str, csrc: Path, isa: str):
    """The kernels of `csrc`, built for `isa` in a directory of their own (cached under the temp dir)."""
    where = Path(tempfile.gettempdir()) / "nsample-kernel-ab" / f"{name}-{isa}"
    where.mkdir(parents=True, exist_ok=True)
    sources = [str(csrc / s.name) for s in kernels.SOURCES if (csrc / s.name).exists()]
    before = os.environ.get("CXX")
    os.environ["CXX"] = os.environ.get(f"CXX_{name}", before or "c++")  # torch's load compiles with $CXX
    try:
        cflags, ldflags = kernels.flags(isa, csrc)
        cflags += os.environ.get(f"EXTRA_{name}", "").split()
        return load(name=f"nsample_ab_{name}_{isa}", sources=sources, build_directory=str(where),
                    extra_cflags=cflags, extra_ldflags=ldflags)
    finally:
        os.environ.pop("CXX") if before is None else os.environ.update(CXX=before)


def random_blocks(kind: int, N: int, K: int, g: torch.Generator) -> torch.Tensor:
    """N rows of K weights in random blocks of ggml type `kind`, with small fp16 scales (plain F32, F16, BF16 rows:
    small normal values, where random bytes would be NaNs and subnormals too)."""
    if kind in PLAIN:
        return (torch.randn(N, K, generator=g) * 0.02).to(PLAIN[kind]).view(torch.uint8).reshape(N, -1).contiguous()
    weights, size = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
    b = torch.randint(0, 256, (N, K // weights, size), dtype=torch.uint8, generator=g)
    half = torch.tensor([0.01], dtype=torch.float16).view(torch.uint8)
    for at in SCALES[kind]:
        b[..., at:at + 2] = half
    if kind in E8M0:
        b[..., E8M0[kind]] = 120
    return b.reshape(N, -1).contiguous()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isa", choices=ISA_FLAGS, required=True)
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--copies", type=int, default=8, help="copies of each shape's weights, cycled through")
    ap.add_argument("--shapes", nargs="+", default=["12x5632x2048", "12x2048x5632", "14x2048x5632"])
    ap.add_argument("--kernel", choices=("float32", "int8"), default="float32",
                    help="the float32-activation kernel (gguf_decode_linear) or the int8 one (gguf_decode_q8_linear)")
    ap.add_argument("--builds", nargs="+", required=True, metavar="NAME=CSRC", help="the first is the baseline")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    kernels._ninja_on_path()
    mods = {name: build(name, Path(csrc), args.isa) for name, csrc in (b.split("=", 1) for b in args.builds)}
    g = torch.Generator().manual_seed(0)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes]
    data = {s: [random_blocks(s[0], s[1], s[2], g) for _ in range(args.copies)] for s in shapes}
    times: dict = {}
    for rnd in range(7):
        order = list(mods.items())
        order = order[rnd % len(order):] + order[:rnd % len(order)]  # the builds' order turned each round
        for s in shapes:
            for R in args.rows:
                x = torch.randn(R, s[2], generator=g)
                for name, m in order:
                    reps = max(3, 200 // R)
                    linear = m.gguf_decode_linear if args.kernel == "float32" else m.gguf_decode_q8_linear
                    linear(x, data[s][0], s[0], None)
                    t = time.perf_counter()
                    for i in range(reps):
                        linear(x, data[s][i % args.copies], s[0], None)
                    times.setdefault((s, R, name), []).append((time.perf_counter() - t) / reps)
    for s in shapes:
        for R in args.rows:
            med = [sorted(times[(s, R, n)])[3] for n in mods]
            each = "  ".join(f"{n} {t * 1e3:.3f} ms" for n, t in zip(mods, med))
            ratios = " ".join(f"{t / med[0]:.3f}" for t in med[1:])
            print(f"type {s[0]} {s[1]}x{s[2]} rows {R}: {each} | {s[1] * s[2] * R / med[0] / 1e9:.1f} GMAC/s | "
                  f"ratio {ratios}")


if __name__ == "__main__":
    main()

"""Which of the decode kernels' AVX-512 instructions share a port on this CPU: each kind alone and in pairs, as
cycles per instruction (or pair) of a loop of twelve independent ones, timed against the multiply-add's one a cycle.

Two kinds that run on different ports take about as long a pair as the slower alone; two on the same port take the
sum. On Zen 4, for one, a broadcast load (vbroadcastss zmm, m32) goes to the port of the widenings and the table
permutes, and an embedded broadcast (vmulps m32{1to16}) does not: what gguf::times in nsample/cpu/csrc/gguf_block.h
rests on (docs/benchmarks.md, stop 56). Compiled with $CXX (else g++) for AVX-512 with VNNI and BF16; x86 only.
Usage: python scripts/instruction_pairs.py [--pairs perm+zx fma+perm ...]
"""
import argparse
import os
import subprocess
import tempfile
from pathlib import Path

KINDS = {  # each writes zmm{r} (0..11) from zmm16 and zmm17 or memory, so twelve in a row are independent
    "fma": "vfmadd231ps %%zmm16,%%zmm17,%%zmm{r}",
    "mul": "vmulps %%zmm16,%%zmm17,%%zmm{r}",
    "add": "vaddps %%zmm16,%%zmm17,%%zmm{r}",
    "perm": "vpermps %%zmm16,%%zmm17,%%zmm{r}",
    "perm2": "vpermt2ps %%zmm16,%%zmm17,%%zmm{r}",
    "zx": "vpmovzxbd %%xmm16,%%zmm{r}",
    "zxm": "vpmovzxbd 16(%%rsp),%%zmm{r}",
    "cvt": "vcvtdq2ps %%zmm16,%%zmm{r}",
    "srl": "vpsrld $4,%%zmm16,%%zmm{r}",
    "and": "vpandd %%zmm17,%%zmm16,%%zmm{r}",
    "tern": "vpternlogd $0xE4,%%zmm17,%%zmm16,%%zmm{r}",
    "bcst": "vbroadcastss 8(%%rsp),%%zmm{r}",
    "bcstr": "vbroadcastss %%xmm16,%%zmm{r}",
    "ebmul": "vmulps 8(%%rsp)%{{1to16%}},%%zmm16,%%zmm{r}",
    "ebsub": "vsubps 12(%%rsp)%{{1to16%}},%%zmm16,%%zmm{r}",
    "dpbusd": "vpdpbusd %%zmm16,%%zmm17,%%zmm{r}",
    "bf16": "vdpbf16ps %%zmm16,%%zmm17,%%zmm{r}",
}
PAIRS = ["perm+zx", "perm+zxm", "perm+bcst", "perm+bcstr", "perm+fma", "perm+ebmul", "perm+srl", "fma+zxm",
         "fma+ebmul", "fma+perm2", "fma+dpbusd", "fma+bf16", "fma+cvt", "fma+add"]

SOURCE = """#include <chrono>
#include <cstdio>
template <class F> double cycles(F f) {  // per loop iteration, the multiply-add's loop taken as 12 cycles
  f(1000);
  auto a = std::chrono::steady_clock::now();
  f(200000);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}
int main() {
  asm volatile("vxorps %%zmm16,%%zmm16,%%zmm16; vxorps %%zmm17,%%zmm17,%%zmm17" ::: "zmm16", "zmm17");
  const double unit = cycles([](long n) { for (long i = 0; i < n; ++i) asm volatile("BASE" ::: CLOBBERS); }) / 12;
BODY}
"""


def loop(kinds: list[str]) -> str:
    """Twelve of each kind, interleaved, as one asm string."""
    return "; ".join(KINDS[k].format(r=(i * len(kinds) + j) % 12) for i in range(12) for j, k in enumerate(kinds))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", nargs="+", default=PAIRS, help="kinds joined by +: " + " ".join(KINDS))
    args = ap.parse_args()
    groups = [[k] for k in KINDS] + [p.split("+") for p in args.pairs]
    clobbers = ", ".join(f'"zmm{i}"' for i in range(12))
    body = "".join(
        f'  printf("%-14s %5.2f cycles\\n", "{"+".join(g)}", cycles([](long n) {{ for (long i = 0; i < n; ++i) '
        f'asm volatile("{loop(g)}" ::: {clobbers}); }}) / unit / 12);\n' for g in groups)
    source = SOURCE.replace("BASE", loop(["fma"])).replace("CLOBBERS", clobbers).replace("BODY", body)
    with tempfile.TemporaryDirectory() as tmp:
        cpp, exe = Path(tmp) / "pairs.cpp", Path(tmp) / "pairs"
        cpp.write_text(source)
        subprocess.run([os.environ.get("CXX", "g++"), "-O2", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni",
                        "-mavx512bf16", str(cpp), "-o", str(exe)], check=True)
        print("cycles per instruction (one kind) or per pair, the multiply-add alone taken as 1")
        print(subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout, end="")


if __name__ == "__main__":
    main()

"""GGUF fixtures made with llama.cpp's own quantizer (llama-cpp-python's llama_model_quantize), for tests and benches.

  --embedded (default)  the embedded SmolLM2-135M-Instruct (Q4_1) requantized to Q4_K_M, Q6_K and Q8_0 (--types
                        picks others: any of FTYPES), a few seconds each. SmolLM2's hidden size (576) is no multiple
                        of 256, so llama.cpp falls back from the K-quants on every tensor with 576 columns (Q4_K ->
                        Q5_0, Q6_K -> Q8_0): only ffn_down (1536 columns) holds K-quant blocks.
  --large               a 1.1B-parameter Llama of TinyLlama's shape (LARGE) with seeded random weights (normal, std
                        0.02; norms 1.0; an untied output.weight) and SmolLM2's tokenizer and chat template, written
                        as F16 and quantized to Q4_1 and Q4_K_M (about 0.7 GB each; the 2.3 GB F16 is deleted
                        afterwards). For scripts/benchmark.py only, never the test suite.
  --7b                  the same at Mistral-7B's shape (SEVEN_B: 7.4B parameters with SmolLM2's vocabulary), Q4_K_M
                        only by default: the size most people download (4.2 GB; the 14 GB F16 deleted afterwards;
                        7 minutes on 2 cores here).
  --qwen3               a Qwen 3 of Qwen3-0.6B's shape (QWEN3: an RMSNorm of each q and k head, head size 128, a
                        tied head; SmolLM2's vocabulary, so 0.47B parameters), Q4_K_M by default.
  --gemma2              a Gemma 2 of Gemma-2-2B's shape (GEMMA2: norms after the attention and the MLP, no q/k norms,
                        head size 256, every other layer in a 4096-token window, scores and logits soft-capped at 50
                        and 30; SmolLM2's vocabulary, so 2.1B parameters), Q4_K_M.
  --gemma3              a Gemma 3 of Gemma-3-1B's shape (GEMMA3: q and k head norms and norms after the attention
                        and the MLP, all 1.0 as stored, so Gemma's 1 + w is 1; head size 256, one KV head, a 512-token
                        sliding window on five layers of six; SmolLM2's vocabulary, so 0.75B parameters), Q4_K_M.
  --qwen3moe            a Qwen 3 MoE of Qwen3-30B-A3B's kind scaled down (QWEN3MOE: 64 experts of 512 in each of 12
                        layers, 8 a token, a float32 router; q/k head norms, head size 128, an untied head; SmolLM2's
                        vocabulary, so 1.4B parameters of which 0.3B a token), Q4_K_M.
  --phi4mini            a Phi 3 of Phi-4-mini's shape (PHI4MINI: q|k|v and gate|up each one tensor, 96 of each head's
                        128 dimensions turned, LongRoPE of 4096 -> 131072 with factors 1.0, a tied head; SmolLM2's
                        vocabulary, so 3.4B parameters), Q4_K_M (2.1 GB; 7 GB free disk while its F16 exists).
  --smollm3             a SmolLM3 of SmolLM3-3B's shape (SMOLLM3: every fourth layer without a rotary embedding, a tied
                        head; SmolLM2's vocabulary, so 2.9B parameters), Q4_K_M (1.7 GB).
  --olmo2               an OLMo 2 of OLMo-2-0425-1B's shape (OLMO2: norms after the attention and the MLP, not before,
                        RMSNorms on all of q and of k, 16 KV heads, an untied head; SmolLM2's vocabulary, so 1.1B
                        parameters), Q4_K_M.
  --gptoss              a gpt-oss of gpt-oss-20b's shape (GPTOSS: 32 experts of 2880 in each of 24 layers, 4 a token,
                        a bias on every projection, a sink per head, every other layer in a 128-token window, YaRN;
                        SmolLM2's vocabulary, so 20B parameters of which 3.5B a token), MXFP4_MOE: llama.cpp's MXFP4
                        for the experts (11 GB; 40 GB of F16 on disk meanwhile, some 12 minutes here).
Files go to --out (default $NSAMPLE_CACHE_DIR/fixtures, else ~/.cache/nsample/fixtures), named by a key of their
source file's path, size and mtime (as nsample.models.model_loader.converted_gguf keys its cache); a file that already
exists is kept. Each quantization runs in a child process, so llama.cpp (and its OpenMP runtime) never loads into
the caller, e.g. a test process; files appear atomically (written under a temporary name, then renamed).
For every file it prints the tensor count per ggml type, the type(s) of each tensor kind, and the size.

Usage: python scripts/make_fixtures.py [--embedded] [--large] [--7b] [--qwen3] [--gemma3] [--qwen3moe] [--phi4mini]
                                       [--smollm3] [--olmo2] [--gptoss]
                                       [--types Q4_K_M ...]
                                       [--out DIR] [--paths]
       python scripts/benchmark.py --gguf $(python scripts/make_fixtures.py --embedded --large --paths)
In tests: sys.path.insert(0, "scripts"); from make_fixtures import fixture; path = fixture("Q4_K_M")
"""
import argparse
import hashlib
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import gguf
import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter

from nsample.models import model_cache
from nsample.models.embedded import EMBEDDED_NAME, cache_dir, embedded_gguf

FTYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S",
          "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ3_S", "IQ3_M", "IQ4_NL", "IQ4_XS", "MXFP4_MOE")
# llama.cpp's LLAMA_FTYPE_MOSTLY_<name> (F32: LLAMA_FTYPE_ALL_F32). Not the IQ1, IQ2 and IQ3_XXS files: some of
# their tensors need an importance matrix, without which llama.cpp's quantizer refuses them (IQ3_XXS, tried here)
EMBEDDED_TYPES = ("Q4_K_M", "Q6_K", "Q8_0")
LARGE = {"hidden": 2048, "intermediate": 5632, "layers": 22, "heads": 32, "kv_heads": 4, "context": 2048,
         "rope_base": 10000.0, "rms_eps": 1e-5}  # TinyLlama-1.1B's shape
SEVEN_B = {"hidden": 4096, "intermediate": 14336, "layers": 32, "heads": 32, "kv_heads": 8, "context": 4096,
           "rope_base": 1000000.0, "rms_eps": 1e-5}  # Mistral-7B's shape
QWEN3 = {"arch": "qwen3", "hidden": 1024, "intermediate": 3072, "layers": 28, "heads": 16, "kv_heads": 8,
         "head_dim": 128, "tied": True, "context": 4096, "rope_base": 1000000.0, "rms_eps": 1e-6}  # Qwen3-0.6B's
GEMMA2 = {"arch": "gemma2", "hidden": 2304, "intermediate": 9216, "layers": 26, "heads": 8, "kv_heads": 4,
          "head_dim": 256, "tied": True, "context": 8192, "rope_base": 10000.0, "rms_eps": 1e-6,
          "sliding_window": 4096, "softcaps": (50.0, 30.0)}  # Gemma-2-2B's: every other layer in the window
GEMMA3 = {"arch": "gemma3", "hidden": 1152, "intermediate": 6912, "layers": 26, "heads": 4, "kv_heads": 1,
          "head_dim": 256, "tied": True, "context": 32768, "rope_base": 1000000.0, "rms_eps": 1e-6,
          "sliding_window": 512}  # Gemma-3-1B's
QWEN3MOE = {"arch": "qwen3moe", "hidden": 1024, "intermediate": 3072, "layers": 12, "heads": 16, "kv_heads": 4,
            "head_dim": 128, "experts": 64, "experts_used": 8, "expert_ff": 512, "context": 4096,
            "rope_base": 1000000.0, "rms_eps": 1e-6}  # Qwen3-30B-A3B's kind (8 of its experts a token), scaled down
PHI4MINI = {"arch": "phi3", "hidden": 3072, "intermediate": 8192, "layers": 32, "heads": 24, "kv_heads": 8,
            "rotary_dim": 96, "tied": True, "context": 131072, "original_context": 4096, "rope_base": 10000.0,
            "rms_eps": 1e-5}  # Phi-4-mini's: q|k|v and gate|up each one tensor, 96 of 128 turned, LongRoPE
SMOLLM3 = {"arch": "smollm3", "hidden": 2048, "intermediate": 11008, "layers": 36, "heads": 16, "kv_heads": 4,
           "tied": True, "context": 65536, "rope_base": 5000000.0, "rms_eps": 1e-6}  # SmolLM3-3B's: rope off on 1 in 4
OLMO2 = {"arch": "olmo2", "hidden": 2048, "intermediate": 8192, "layers": 16, "heads": 16, "kv_heads": 16,
         "context": 4096, "rope_base": 500000.0, "rms_eps": 1e-6}  # OLMo-2-0425-1B's: norms after attention and MLP
GPTOSS = {"arch": "gpt-oss", "hidden": 2880, "intermediate": 2880, "layers": 24, "heads": 64, "kv_heads": 8,
          "head_dim": 64, "experts": 32, "experts_used": 4, "expert_ff": 2880, "context": 131072,
          "original_context": 4096, "yarn": 32.0, "rope_base": 150000.0, "rms_eps": 1e-5,
          "sliding_window": 128}  # gpt-oss-20b's: biases, sinks, every other layer in the window, YaRN
MODELS = {  # flag -> name, shape, default types, what --help says
    "large": ("TinyLlama-1.1B-random", LARGE, ("Q4_1", "Q4_K_M"),
              "the 1.1B random Llama (minutes, ~1.4 GB)"),
    "7b": ("Mistral-7B-random", SEVEN_B, ("Q4_K_M",),
           "a 7.4B random model of Mistral-7B's shape (minutes, 4.2 GB; 15 GB free disk while its F16 exists)"),
    "qwen3": ("Qwen3-0.6B-random", QWEN3, ("Q4_K_M",),
              "a 0.47B random Qwen 3 of Qwen3-0.6B's shape (q/k norms, head size 128, tied)"),
    "gemma2": ("Gemma2-2B-random", GEMMA2, ("Q4_K_M",),
               "a 2.1B random Gemma 2 of Gemma-2-2B's shape (soft-capped scores and logits; SmolLM2's vocabulary)"),
    "gemma3": ("Gemma3-1B-random", GEMMA3, ("Q4_K_M",),
               "a 0.75B random Gemma 3 of Gemma-3-1B's shape (SmolLM2's vocabulary)"),
    "qwen3moe": ("Qwen3-MoE-1.4B-A0.3B-random", QWEN3MOE, ("Q4_K_M",),
                 "a 1.4B random Qwen 3 MoE (64 experts of 512, 8 a token: 0.3B active; q/k norms, untied head)"),
    "phi4mini": ("Phi-4-mini-3.4B-random", PHI4MINI, ("Q4_K_M",),
                 "a 3.4B random Phi 3 of Phi-4-mini's shape (partial rotary, LongRoPE, tied)"),
    "smollm3": ("SmolLM3-2.9B-random", SMOLLM3, ("Q4_K_M",),
                "a 2.9B random SmolLM3 of SmolLM3-3B's shape (rope off on every fourth layer)"),
    "olmo2": ("OLMo-2-1B-random", OLMO2, ("Q4_K_M",),
              "a 1.1B random OLMo 2 of OLMo-2-0425-1B's shape (norms after attention and MLP)"),
    "gptoss": ("gpt-oss-20B-random", GPTOSS, ("MXFP4_MOE",),
               "a 20B random gpt-oss of gpt-oss-20b's shape (MXFP4 experts; 11 GB, 40 GB free disk while its F16 "
               "exists)"),
}
KINDS = ("token_embd", "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
         "ffn_down", "output_norm", "output")  # the order kinds are listed in (others after them)
SEED, STD = 0, 0.02
MIB = 2**20


def fixtures_dir() -> Path:
    return cache_dir() / "fixtures"


def large_key(tokenizer_source: Path, shape: dict) -> str:
    return hashlib.sha256(f"{model_cache.key(tokenizer_source)}:{sorted(shape.items())}:{SEED}:{STD}".encode()
                          ).hexdigest()[:12]


def replace_older(target: Path, stem: str) -> None:
    """Remove the fixtures of `stem` (a model and type) other than `target`: builds from an earlier install of the
    embedded file, which nothing asks for again (their conversions in the cache go with them: model_cache)."""
    for old in target.parent.glob(f"{stem}-*.gguf"):
        if old != target:
            old.unlink(missing_ok=True)


def fixture(name: str, out: Path | None = None) -> Path:
    """The fixture `name`, built if missing: a type of FTYPES (the embedded model requantized, seconds),
    "large-Q4_1" / "large-Q4_K_M" (the 1.1B model, minutes) or "7b-Q4_K_M" (minutes more): benchmarks only."""
    out = out or fixtures_dir()
    prefix, _, qtype = name.partition("-")
    if prefix in MODELS and qtype:
        return build_large(out, (qtype,), prefix)[0]
    if name not in FTYPES:
        raise ValueError(f"unknown fixture {name!r}: one of {', '.join(FTYPES)}, large-<type> or 7b-<type>")
    source = embedded_gguf()
    target = out / f"{EMBEDDED_NAME}.{name}-{model_cache.key(source)}.gguf"
    if not target.is_file():
        quantize(source, target, name)
        replace_older(target, f"{EMBEDDED_NAME}.{name}")
    return target


def build_embedded(out: Path, types: tuple[str, ...] = EMBEDDED_TYPES) -> list[Path]:
    return [fixture(t, out) for t in types]


def build_large(out: Path, types: tuple[str, ...], model: str) -> list[Path]:
    """The random model of MODELS[model] quantized to `types`: its F16 written (seeded), quantized, then deleted."""
    name, shape = MODELS[model][:2]
    source = embedded_gguf()
    key = large_key(source, shape)
    targets = [out / f"{name}.{t}-{key}.gguf" for t in types]
    missing = [(t, p) for t, p in zip(types, targets) if not p.is_file()]
    if missing:
        f16 = out / f"{name}.F16-{key}.gguf"
        if not f16.is_file():
            timed(f"wrote {f16.name}", write_large_f16, f16, source, name, shape)
        for qtype, target in missing:
            timed(f"quantized {target.name}", quantize, f16, target, qtype)
            replace_older(target, f"{name}.{qtype}")
        f16.unlink()
    return targets


def timed(what: str, fn, *args) -> None:
    t0 = time.perf_counter()
    fn(*args)
    print(f"{what} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)


def quantize(source: Path, target: Path, qtype: str) -> None:
    """llama.cpp's quantizer from `source` to `target` (requantizing allowed), in a child process; atomic."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        done = subprocess.run([sys.executable, __file__, "--quantize", str(source), str(tmp), qtype],
                              check=False, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"quantizing {source} to {qtype} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def quantize_here(source: str, target: str, qtype: str) -> None:
    """The child's side of quantize(): the only place llama.cpp loads."""
    import llama_cpp

    quiet = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
    llama_cpp.llama_log_set(quiet, None)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, "LLAMA_FTYPE_ALL_F32" if qtype == "F32" else f"LLAMA_FTYPE_MOSTLY_{qtype}")
    params.allow_requantize = True  # the embedded source is Q4_1 already
    params.nthread = os.cpu_count() or 1
    if llama_cpp.llama_model_quantize(source.encode(), target.encode(), params) != 0:
        raise SystemExit(f"llama_model_quantize({source} -> {qtype}) failed")


def large_tensors(vocab: int, shape: dict) -> list[tuple[str, tuple[int, ...]]]:
    """(name, numpy shape: rows first) of a random model of `shape`, in file order; 1-D ones are norms. Qwen 3's and
    Gemma 3's (shape["arch"]) have a norm of each q and k head (attn_q_norm, attn_k_norm) and a head size of their
    own; Gemma 3's a norm after the attention and after the MLP too."""
    h, f, d = shape["hidden"], shape["intermediate"], shape.get("head_dim", shape["hidden"] // shape["heads"])
    q, kv, arch = d * shape["heads"], d * shape["kv_heads"], shape.get("arch")
    layer = [("attn_norm", (h,)), ("attn_q", (q, h)), ("attn_k", (kv, h)), ("attn_v", (kv, h)),
             ("attn_output", (h, q)), ("ffn_norm", (h,)), ("ffn_gate", (f, h)), ("ffn_up", (f, h)),
             ("ffn_down", (h, f))] + ([("attn_q_norm", (d,)), ("attn_k_norm", (d,))]
                                      if arch in ("qwen3", "qwen3moe", "gemma3") else [])
    layer += [("post_attention_norm", (h,)), ("post_ffw_norm", (h,))] if arch in ("gemma2", "gemma3") else []
    if arch == "olmo2":  # no norms before attention and MLP: after them, and on all of q and of k
        layer = [(k, d) for k, d in layer if k not in ("attn_norm", "ffn_norm")] + [
            ("attn_q_norm", (q,)), ("attn_k_norm", (kv,)), ("post_attention_norm", (h,)), ("post_ffw_norm", (h,))]
    if arch == "phi3":  # q|k|v and gate|up each one tensor
        layer = [("attn_norm", (h,)), ("attn_qkv", (q + 2 * kv, h)), ("attn_output", (h, q)), ("ffn_norm", (h,)),
                 ("ffn_up", (2 * f, h)), ("ffn_down", (h, f))]
    if "experts" in shape:  # a mixture of experts in place of the MLP: a router, then (experts, rows, columns)
        E, ef = shape["experts"], shape["expert_ff"]
        layer = [(k, d) for k, d in layer if k not in ("ffn_gate", "ffn_up", "ffn_down")] + [
            ("ffn_gate_inp", (E, h)), ("ffn_gate_exps", (E, ef, h)), ("ffn_up_exps", (E, ef, h)),
            ("ffn_down_exps", (E, h, ef))]
    if arch == "gpt-oss":  # a bias on every projection, a sink per head; its MLP's norm is post_attention_norm
        layer = [(k.replace("ffn_norm", "post_attention_norm"), d) for k, d in layer]
        layer += [(f"{k}.bias", d[:-1]) for k, d in layer if len(d) > 1] + [("attn_sinks", (shape["heads"],))]
    longrope = [(f"rope_factors_{k}.weight", (shape["rotary_dim"] // 2,)) for k in ("long", "short")
                ] if "rotary_dim" in shape else []  # LongRoPE's factors (1.0 here: 1-D tensors are ones)
    return ([("token_embd.weight", (vocab, h))] + longrope
            + [(f"blk.{i}.{kind}" + ("" if kind.endswith(".bias") else ".weight"), dims)
               for i in range(shape["layers"]) for kind, dims in layer]
            + [("output_norm.weight", (h,))] + ([] if shape.get("tied") else [("output.weight", (vocab, h))]))


def large_dtype(name: str, shape: tuple[int, ...]) -> np.dtype:
    """float32 for norms, biases, sinks and a MoE router (as llama.cpp's converter writes them), float16 for the
    rest."""
    return np.dtype(np.float32 if len(shape) == 1 or ".ffn_gate_inp." in name or name.endswith(".bias")
                    else np.float16)


def large_tensor(index: int, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Norms and sinks 1.0, biases 0; weights normal(0, STD), seeded per tensor; in large_dtype."""
    if name.endswith(".bias"):
        return np.zeros(shape, dtype=np.float32)
    if len(shape) == 1:
        return np.ones(shape, dtype=np.float32)
    rng = np.random.default_rng([SEED, index])
    return (rng.standard_normal(shape, dtype=np.float32) * STD).astype(large_dtype(name, shape))


def copy_tokenizer(reader: GGUFReader, writer: GGUFWriter) -> int:
    """Every tokenizer.* key (the vocabulary, merges, special ids, chat template) of `reader` into `writer`."""
    fields = [f for f in reader.fields.values() if f.name.startswith("tokenizer.")]
    for field in fields:
        array = field.types[0] == GGUFValueType.ARRAY
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=field.types[-1] if array else None)
    return len(fields)


def write_large_f16(path: Path, tokenizer_source: Path, name: str, shape: dict) -> None:
    """A random model of `shape` as F16, streamed tensor by tensor (never all in memory), under a temporary name
    first."""
    reader = GGUFReader(tokenizer_source)
    vocab = len(reader.fields["tokenizer.ggml.tokens"].data)
    h = shape["hidden"]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    arch = shape.get("arch", "llama")
    writer = GGUFWriter(tmp, arch)
    writer.add_name(name)
    writer.add_context_length(shape["context"])
    writer.add_embedding_length(h)
    writer.add_block_count(shape["layers"])
    writer.add_feed_forward_length(shape["intermediate"])
    writer.add_head_count(shape["heads"])
    writer.add_head_count_kv(shape["kv_heads"])
    head_dim = shape.get("head_dim", h // shape["heads"])
    writer.add_rope_dimension_count(shape.get("rotary_dim", head_dim))
    if "yarn" in shape:  # gpt-oss's, as its converter writes it
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(shape["yarn"])
        writer.add_rope_scaling_orig_ctx_len(shape["original_context"])
    elif "original_context" in shape:  # LongRoPE, as llama.cpp's converter writes Phi 3's
        writer.add_rope_scaling_orig_ctx_len(shape["original_context"])
        writer.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(shape["context"] / shape["original_context"])
                                                       / math.log(shape["original_context"])))
    if "head_dim" in shape:
        writer.add_key_length(head_dim)
        writer.add_value_length(head_dim)
    writer.add_rope_freq_base(shape["rope_base"])
    if "sliding_window" in shape:
        writer.add_sliding_window(shape["sliding_window"])
    if "softcaps" in shape:  # Gemma 2's, of its attention scores and of its logits
        writer.add_attn_logit_softcapping(shape["softcaps"][0])
        writer.add_final_logit_softcapping(shape["softcaps"][1])
    if "experts" in shape:
        writer.add_expert_count(shape["experts"])
        writer.add_expert_used_count(shape["experts_used"])
        writer.add_expert_feed_forward_length(shape["expert_ff"])
    writer.add_layer_norm_rms_eps(shape["rms_eps"])
    writer.add_vocab_size(vocab)
    writer.add_file_type(1)  # LLAMA_FTYPE_MOSTLY_F16
    copy_tokenizer(reader, writer)
    specs = large_tensors(vocab, shape)
    for tensor, dims in specs:
        dtype = large_dtype(tensor, dims)
        writer.add_tensor_info(tensor, dims, dtype, int(np.prod(dims)) * dtype.itemsize)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for index, (tensor, dims) in enumerate(specs):
            writer.write_tensor_data(large_tensor(index, tensor, dims))
        writer.close()
        os.replace(tmp, path)
    finally:
        writer.close()
        tmp.unlink(missing_ok=True)


def kind_of(tensor: str) -> str:
    """blk.3.attn_q.weight -> attn_q; token_embd.weight -> token_embd; blk.0.attn_q.bias -> attn_q.bias."""
    return re.sub(r"\.weight$", "", re.sub(r"^blk\.\d+\.", "", tensor))


def contents(path: Path) -> dict:
    """What a GGUF holds: its size, tensor count per ggml type, types per tensor kind, whether the head is tied,
    and the tensor bytes one decode step reads (all but token_embd; token_embd too when it is the tied head), and
    one token's (a mixture of experts' expert_used_count of its expert_count experts)."""
    reader = GGUFReader(path)
    tensors = reader.tensors
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    experts, used = (reader.fields.get(f"{arch}.expert_{k}count") for k in ("", "used_"))
    share = int(used.contents()) / int(experts.contents()) if experts and used else 1.0  # of experts a token reads
    kinds: dict[str, Counter] = {}
    for t in tensors:
        kinds.setdefault(kind_of(t.name), Counter())[t.tensor_type.name] += 1
    tied = "output" not in kinds
    return {"size": path.stat().st_size, "tensors": len(tensors),
            "types": Counter(t.tensor_type.name for t in tensors), "kinds": kinds, "tied": tied,
            "decode_bytes": sum(int(t.n_bytes) for t in tensors if tied or kind_of(t.name) != "token_embd"),
            "token_bytes": sum(int(t.n_bytes) * (share if kind_of(t.name).endswith("_exps") else 1) for t in tensors
                               if tied or kind_of(t.name) != "token_embd")}


def type_counts(counts: Counter, times: str = " ") -> str:
    """Counter({"Q5_0": 16, "Q8_0": 14}) -> "Q5_0 16, Q8_0 14" (times=" ") or "Q5_0 x16, Q8_0 x14" (times=" x")."""
    return ", ".join(f"{t}{times}{n}" for t, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def kind_types(info: dict, kind: str) -> str:
    """The ggml type(s) of one tensor kind in a file, e.g. "Q6_K" or "Q4_K x16, Q6_K x14"."""
    if kind == "output" and info["tied"]:
        return "tied: token_embd"
    counts = info["kinds"].get(kind)
    if not counts:
        return "-"
    return next(iter(counts)) if len(counts) == 1 else type_counts(counts, " x")


def summary(path: Path, per_kind: bool = True) -> str:
    """What a GGUF holds (see contents()): size and type counts, then (per_kind) a line of each kind's types."""
    info = contents(path)
    line = (f"{path.name}: {info['size'] / MIB:.1f} MiB, {info['tensors']} tensors: {type_counts(info['types'])}; "
            f"read per decode step {info['decode_bytes'] / MIB:.1f} MiB")
    return line + ("\n  " + " | ".join(f"{k} {kind_types(info, k)}" for k in kinds_of(info)) if per_kind else "")


def kinds_of(info: dict, extra=()) -> list[str]:
    """The file's tensor kinds (and `extra` ones), in KINDS order; output too where the head is tied."""
    kinds = set(info["kinds"]) | set(extra) | ({"output"} if info["tied"] else set())
    return sorted(kinds, key=lambda k: (KINDS.index(k) if k in KINDS else len(KINDS), k))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedded", action="store_true", help="the embedded model requantized (the default)")
    for flag, (_, _, types, what) in MODELS.items():
        ap.add_argument(f"--{flag}", action="store_true", help=f"{what}, as {' and '.join(types)}")
    ap.add_argument("--types", nargs="+", choices=FTYPES, default=None,
                    help=f"types to build (default {' '.join(EMBEDDED_TYPES)} for --embedded; each model's own)")
    ap.add_argument("--out", type=Path, default=None, help="default: $NSAMPLE_CACHE_DIR/fixtures")
    ap.add_argument("--paths", action="store_true",
                    help="print only the files' paths, one a line (for `benchmark.py --gguf $(...)`)")
    ap.add_argument("--quantize", nargs=3, metavar=("SRC", "DST", "TYPE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quantize:
        quantize_here(*args.quantize)
        return
    out = args.out or fixtures_dir()
    paths = []
    asked = [flag for flag in MODELS if vars(args)[flag]]
    if args.embedded or not asked:
        paths += build_embedded(out, tuple(args.types or EMBEDDED_TYPES))
    for model in asked:
        t0 = time.perf_counter()
        paths += build_large(out, tuple(args.types or MODELS[model][2]), model)
        print(f"{model} fixtures ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr if args.paths else None)
    for path in paths:
        print(path if args.paths else f"{path}\n  {summary(path)}")


if __name__ == "__main__":
    main()

"""The tiny random Llama (nsample.models.tiny_model) written as a GGUF file, its tensors quantized by llama.cpp's own
quantizer (tests/ggml_quantizer.py), as llama.cpp's converter lays them out (q/k rows permuted for its rotary), with the
embedded model's tokenizer: fixtures of every block format in a fraction of a second, for the loader's tests."""
import functools
import math
from pathlib import Path

import torch
from ggml_quantizer import F32, quantize

from nsample.models.embedded import embedded_gguf
from nsample.models.tiny_model import tiny_model

KINDS = ("token_embd", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
HF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
      "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
      "ffn_down": "mlp.down_proj"}


@functools.cache
def tokenizer_fields() -> list:
    """The embedded GGUF's tokenizer keys: (key, value, type, sub type)."""
    from gguf import GGUFReader

    reader = GGUFReader(embedded_gguf())
    return [(k, f.contents(), f.types[0], f.types[-1] if len(f.types) > 1 else None)
            for k, f in reader.fields.items() if k.startswith("tokenizer.")]


def permute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """llama.cpp's converter's q/k row order (convert_hf_to_gguf.py's LlamaModel.permute)."""
    return w.reshape(heads, 2, len(w) // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _writer(path: Path, arch: str, cfg):
    """A GGUF writer for `arch` holding the shape keys every file has, from the transformers config `cfg`."""
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), arch)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    return writer


def _add(writer, name: str, w: torch.Tensor, type_id: int) -> None:
    """Tensor `name`: float32 where F32 or 1-D, else quantized to `type_id` by llama.cpp's quantizer."""
    from gguf import GGMLQuantizationType

    if type_id == F32 or w.dim() == 1:
        writer.add_tensor(name, w.detach().float().numpy())
    else:  # a 3-D tensor (experts) is quantized as its rows, as llama.cpp's quantizer does
        blocks = quantize(w.reshape(-1, w.shape[-1]), type_id)
        writer.add_tensor(name, blocks.reshape(*w.shape[:-1], -1).numpy(), raw_dtype=GGMLQuantizationType(type_id))


def _add_value(writer, key: str, value) -> None:
    """A metadata key of a str, bool, int (uint32) or float (float32) value."""
    from gguf import GGUFValueType

    kind = (GGUFValueType.STRING if isinstance(value, str) else GGUFValueType.BOOL if isinstance(value, bool) else
            GGUFValueType.UINT32 if isinstance(value, int) else GGUFValueType.FLOAT32)
    writer.add_key_value(key, value, kind)


def _finish(writer, path: Path) -> Path:
    """The embedded model's tokenizer keys, then the file written and closed."""
    for key, value, vtype, sub in tokenizer_fields():
        writer.add_key_value(key, value, vtype, sub)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def llama3_factors(head_dim: int, theta: float, factor: float, low_freq_factor: float, high_freq_factor: float,
                   original_max_position_embeddings: int) -> torch.Tensor:
    """The rotary frequency factors llama.cpp's converter writes for "llama3" rope scaling (rope_freqs.weight), as
    its LlamaModel.generate_extra_tensors computes them."""
    context = original_max_position_embeddings
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    low_freq_wavelen, high_freq_wavelen = context / low_freq_factor, context / high_freq_factor
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1)
        elif wavelen > low_freq_wavelen:
            factors.append(factor)
        else:
            smooth = (context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(factors, dtype=torch.float32)


def write(path: Path, types: dict[str, int] | int, hidden: int = 256, layers: int = 2, seed: int = 0,
          tied: bool = True, llama3: dict | None = None, rope_scaling: dict | None = None) -> Path:
    """A GGUF file at `path` of the tiny model; `types`: one ggml type for every projection and the embedding, or
    one per kind in KINDS (and "output" when untied). Norms are F32, as llama.cpp keeps them. `llama3`: that rope
    scaling's parameters (llama3_factors), written as llama.cpp's converter does, as rope_freqs.weight.
    `rope_scaling`: metadata keys {arch}.rope.<key> and their values (as llama.cpp's converter writes a linear or
    YaRN scaling: {"scaling.type": "yarn", "scaling.factor": 4.0, ...})."""
    model, _ = tiny_model(seed=seed, layers=layers, hidden=hidden)
    rng = torch.Generator().manual_seed(seed)
    cfg = model.config
    kinds = {k: types if isinstance(types, int) else types.get(k, F32) for k in (*KINDS, "output")}
    writer = _writer(path, "llama", cfg)
    theta = cfg.rope_parameters["rope_theta"] if getattr(cfg, "rope_parameters", None) else cfg.rope_theta
    writer.add_rope_freq_base(theta)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_dimension_count(hidden // cfg.num_attention_heads)
    writer.add_vocab_size(cfg.vocab_size)
    for key, value in (rope_scaling or {}).items():
        _add_value(writer, f"llama.rope.{key}", value)
    if llama3:
        _add(writer, "rope_freqs.weight", llama3_factors(hidden // cfg.num_attention_heads, theta, **llama3), F32)
    _add(writer, "token_embd.weight", model.model.embed_tokens.weight, kinds["token_embd"])
    if not tied:
        _add(writer, "output.weight", torch.randn(model.lm_head.weight.shape, generator=rng) * 0.5, kinds["output"])
    _add(writer, "output_norm.weight", model.model.norm.weight, F32)
    for i, layer in enumerate(model.model.layers):
        for kind, hf in HF.items():
            w = layer.get_submodule(hf).weight
            if kind in ("attn_q", "attn_k"):
                w = permute(w, cfg.num_attention_heads if kind == "attn_q" else cfg.num_key_value_heads)
            _add(writer, f"blk.{i}.{kind}.weight", w, kinds[kind])
        _add(writer, f"blk.{i}.attn_norm.weight", torch.rand(hidden, generator=rng) + 0.5, F32)
        _add(writer, f"blk.{i}.ffn_norm.weight", torch.rand(hidden, generator=rng) + 0.5, F32)
    return _finish(writer, path)



ARCHS = {  # GGUF architecture -> (transformers model type, its own config beyond the shape)
    "gemma2": ("gemma2", dict(sliding_window=16, attn_logit_softcapping=0.1, final_logit_softcapping=1.0)),  # every
    # other layer slides; caps that bind on this model's scores (up to some 0.2) and logits (up to some 1.6)
    "gemma3": ("gemma3_text", dict(sliding_window=16)),  # five layers of six slide (6+: both kinds)
    "qwen3": ("qwen3", dict(head_dim=128, tie_word_embeddings=True)),  # transformers reads no head size for Qwen 3
    "phi3": ("phi3", dict(pad_token_id=0)),  # q|k|v and gate|up each one tensor (attn_qkv, ffn_up), an untied head
    "smollm3": ("smollm3", dict(tie_word_embeddings=True, pad_token_id=0)),  # every fourth layer without rope (4+)
    "granite": ("granite", dict(embedding_multiplier=12.0, residual_multiplier=0.22, logits_scaling=8.0,
                                attention_multiplier=0.015625, tie_word_embeddings=True)),  # Granite 3's kind
    "olmo2": ("olmo2", dict(tie_word_embeddings=False, pad_token_id=0, eos_token_id=0)),  # post-norms, q/k norms
    # over all heads, q/k rows unpermuted; OLMo 3: OLMo 2's file (FILE_ARCH) with three sliding layers of four (4+)
    "olmo3": ("olmo3", dict(sliding_window=16, tie_word_embeddings=False, pad_token_id=0, eos_token_id=0)),
    # mixtures of experts: 8 experts of 256 (K-quant rows), 2 a token, an untied head (llama.cpp wants Qwen 2 MoE's);
    # Qwen 3's top-k weights normalized (llama.cpp always does for qwen3moe); Qwen 2's with a shared expert and its gate
    "qwen3moe": ("qwen3_moe", dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=256,
                                   norm_topk_prob=True, tie_word_embeddings=False)),
    "qwen2moe": ("qwen2_moe", dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=256,
                                   shared_expert_intermediate_size=512, norm_topk_prob=False,
                                   tie_word_embeddings=False)),
    # gpt-oss: biased attention with a sink per head, every other layer in a window, biased experts with a clamped
    # SwiGLU, softmax over the top k router logits; its rotary plain here (the released models' is YaRN)
    # Mixtral: Llama's file (llama.cpp's converter writes it as a LlamaModel, q/k permuted) with experts in place of
    # the MLP, the top k weights renormalized
    "mixtral": ("mixtral", dict(num_local_experts=8, num_experts_per_tok=2, intermediate_size=256,
                                tie_word_embeddings=False)),
    "gpt-oss": ("gpt_oss", dict(num_local_experts=8, num_experts_per_tok=2, intermediate_size=256,
                                sliding_window=16, tie_word_embeddings=False,
                                rope_parameters={"rope_type": "default", "rope_theta": 150000.0})),
}
MIN_LAYERS = {"smollm3": 4, "olmo3": 4, "gemma3": 6}  # SmolLM3's fourth layer has no rotary embedding, OLMo 3's
# fourth and Gemma 3's sixth attend to all positions
FILE_ARCH = {"olmo3": "olmo2", "mixtral": "llama"}  # where the file's architecture is not the ARCHS key (llama.cpp's
# name for it)
PERMUTED = {"smollm3", "granite", "llama"}  # file architectures whose converter permutes q and k rows as Llama's
# (Mixtral's files are llama's)
GRANITE_KEYS = {"embedding_multiplier": "embedding_scale", "residual_multiplier": "residual_scale",
                "logits_scaling": "logit_scale", "attention_multiplier": "attention.scale"}  # as its converter
EXPERT_KEYS = {"num_experts": "expert_count", "num_local_experts": "expert_count",
               "num_experts_per_tok": "expert_used_count", "moe_intermediate_size": "expert_feed_forward_length",
               "shared_expert_intermediate_size": "expert_shared_feed_forward_length"}  # gguf-py's names


def write_arch(path: Path, arch: str, types: dict[str, int], layers: int = 2, seed: int = 0,
               head_dim: int | None = None, rope_scaling: dict | None = None, rotary_dim: int | None = None,
               extra_tensors: dict[str, torch.Tensor] | None = None, fused_gate_up: bool = False, **config) -> Path:
    """A tiny random model of `arch` (ARCHS; hidden 256, head dim 64 unless ARCHS or `head_dim` says) as llama.cpp's
    converter writes it: each tensor named by gguf-py's map, norms F32 (Gemma's stored as 1 + w, as its converter does
    them), the others in `types`' format for their kind (KINDS; F32 where not given); the embedded model's tokenizer.
    `rope_scaling`: {arch}.rope.<key> metadata, as write's; `rotary_dim`: {arch}.rope.dimension_count, where the
    rotary embedding turns part of each head (Phi-4-mini's 96 of 128); `extra_tensors`: F32 tensors by GGUF name
    (Phi 3's LongRoPE factors, rope_factors_long.weight and rope_factors_short.weight); `fused_gate_up`: the experts'
    gate and up as one ffn_gate_up_exps (each expert's gate rows, then its up rows), as llama.cpp's converter writes
    them with --fuse-gate-up-exps (gpt-oss's bias alike); `config`: more of the transformers config (sliding_window,
    max_position_embeddings ...)."""
    import gguf
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, extra = ARCHS[arch]
    extra = extra | ({} if head_dim is None else {"head_dim": head_dim}) | config
    shape = dict(vocab_size=49152, hidden_size=256, intermediate_size=512, num_hidden_layers=layers,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=2048,
                 rms_norm_eps=1e-6) | extra
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **shape))
    rng = torch.Generator().manual_seed(seed)
    arch, layer_types = FILE_ARCH.get(arch, arch), getattr(model.config, "layer_types", None)
    writer = _writer(path, arch, model.config)
    writer.add_key_length(shape["head_dim"])
    writer.add_value_length(shape["head_dim"])
    writer.add_layer_norm_rms_eps(shape["rms_norm_eps"])
    for key, value in (rope_scaling or {}).items():
        _add_value(writer, f"{arch}.rope.{key}", value)
    if rotary_dim is not None:
        writer.add_rope_dimension_count(rotary_dim)
    rope = model.config.rope_parameters  # one base for every layer, or the full-attention layers' (Gemma 3's 1e6,
    # OLMo 3's), as the converters write it: llama.cpp takes 10000 without it, transformers its config's default
    writer.add_rope_freq_base(rope.get("rope_theta") or rope["full_attention"]["rope_theta"])
    for name, w in (extra_tensors or {}).items():
        _add(writer, name, w, F32)
    for key, value in extra.items():
        if key == "sliding_window":
            writer.add_sliding_window(value)
            if arch == "olmo2":  # OLMo 3's sliding layers, as its converter writes them
                writer.add_sliding_window_pattern([t == "sliding_attention" for t in layer_types])
        elif key.endswith("softcapping"):
            writer.add_float32(f"{arch}.{key}", value)
        elif key in EXPERT_KEYS:
            writer.add_uint32(f"{arch}.{EXPERT_KEYS[key]}", value)
        elif key in GRANITE_KEYS:
            writer.add_float32(f"{arch}.{GRANITE_KEYS[key]}", value)
    if model_type == "gpt_oss":  # its experts' size (llama.cpp reads this key, transformers feed_forward_length)
        writer.add_expert_feed_forward_length(shape["intermediate_size"])
    names = gguf.get_tensor_name_map(next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == arch), layers)
    for hf_name, w in model.state_dict().items():
        if model_type == "gpt_oss" and (parts := _gpt_oss_tensors(names, hf_name, w, rng)) is not None:
            for name, part in _fused(parts) if fused_gate_up else parts:
                _add(writer, name, part, types.get(name.split(".")[-2].removesuffix("_exps"), F32)
                     if name.endswith(".weight") else F32)
            continue
        if hf_name == "lm_head.weight":
            if not model.config.tie_word_embeddings:  # output.weight, in the embedding's format unless `types` says
                _add(writer, "output.weight", w, types.get("output", types.get("token_embd", F32)))
            continue
        base, suffix = hf_name.rsplit(".", 1)
        if base.endswith(".experts"):  # (experts, rows, columns): gate and up fused in transformers, apart in a file
            parts = w.chunk(2, dim=1) if suffix == "gate_up_proj" else (w,)
            parts = [(f"{names.get_name(f'{base}.{kind}')}.weight", part)
                     for part, kind in zip(parts, ("gate_proj", "up_proj") if suffix == "gate_up_proj" else (suffix,))]
            for name, part in _fused(parts) if fused_gate_up else parts:
                _add(writer, name, part, types.get(name.split(".")[-2].removesuffix("_exps"), F32))
            continue
        name = f"{names.get_name(base)}.{suffix}"
        if "norm" in base:  # a scale around 1 (Gemma's norms scale by 1 + w, and its converter stores the 1 + w)
            writer.add_tensor(name, (torch.rand(w.shape, generator=rng) + 0.5).numpy())
            continue
        if ".ffn_gate_inp_shexp." in name:  # the shared expert's gate: one row, which llama.cpp's converter stores 1-D
            w = w.reshape(-1)
        if arch in PERMUTED and base.endswith(("q_proj", "k_proj")):  # for llama.cpp's rotary layout, as Llama's
            w = permute(w, shape["num_attention_heads" if base.endswith("q_proj") else "num_key_value_heads"])
        kind = name.split(".")[-2] if name.startswith("blk.") else name.split(".")[0]
        _add(writer, name, w, types.get(kind.removesuffix("_shexp"), F32))  # a shared expert as the MLP
    return _finish(writer, path)


def _fused(parts: list[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor]]:
    """The experts' gate and up tensors (or biases) of `parts`, (name, tensor) pairs, as one ffn_gate_up_exps, each
    expert's gate rows then its up rows; the others as they are."""
    by_name = dict(parts)
    gate = next((name for name in by_name if ".ffn_gate_exps." in name), None)
    if gate is None:
        return parts
    up = gate.replace(".ffn_gate_exps.", ".ffn_up_exps.")
    fused = torch.cat([by_name.pop(gate), by_name.pop(up)], dim=1)
    return [(gate.replace(".ffn_gate_exps.", ".ffn_gate_up_exps."), fused), *by_name.items()]


def _gpt_oss_tensors(names, hf_name: str, w: torch.Tensor, rng: torch.Generator) -> list | None:
    """gpt-oss's tensors as llama.cpp's converter writes them, where they differ from the plain map: the experts'
    gate_up_proj (experts, hidden, 2 · size), gate and up interleaved in its last dimension, written apart and
    transposed to (experts, rows, columns), and its bias split alike; down_proj transposed; the sinks a `.weight`.
    The biases and sinks, which transformers initializes to zero, are random here (a tenth, and around -1 to 1); None
    for the rest."""
    base, _, suffix = hf_name.rpartition(".")
    if suffix == "sinks":
        return [(f"{names.get_name(hf_name)}.weight", torch.rand(w.shape, generator=rng) * 2 - 1)]
    if suffix.endswith("bias") and "norm" not in base:
        w = torch.randn(w.shape, generator=rng) * 0.1
    if not base.endswith(".experts"):
        return [(f"{names.get_name(base)}.{suffix}", w)] if suffix == "bias" else None
    name = {kind: names.get_name(f"{base}.{kind}") for kind in ("gate_proj", "up_proj", "down_proj")}
    if suffix == "gate_up_proj":
        return [(f"{name['gate_proj']}.weight", w[..., ::2].transpose(1, 2)),
                (f"{name['up_proj']}.weight", w[..., 1::2].transpose(1, 2))]
    if suffix == "gate_up_proj_bias":
        return [(f"{name['gate_proj']}.bias", w[..., ::2]), (f"{name['up_proj']}.bias", w[..., 1::2])]
    if suffix == "down_proj":
        return [(f"{name['down_proj']}.weight", w.transpose(1, 2))]
    return [(f"{name['down_proj']}.bias", w)]

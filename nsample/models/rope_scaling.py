"""A GGUF file's rope scaling (linear, YaRN), which transformers' GGUF config reads for gpt-oss files alone.

llama.cpp's converter writes a model's rope_scaling into the file's metadata: `{arch}.rope.scaling.type`, `.factor`,
`.original_context_length`, and YaRN's `.yarn_beta_fast` / `.yarn_beta_slow` where the model sets them (older files:
`{arch}.rope.scale_linear`). llama.cpp rotates by them: linear divides every position by the factor; YaRN keeps the
high frequencies, divides the low ones by the factor with a ramp between, and scales cos and sin by
1 + 0.1·ln(factor). Without them a model extended so (a "128K" Qwen 3 file, Gemma 3 from 4B up with its linear 8 on
the full-attention layers, an old linear-scaled Llama) rotates every position past the first as its unscaled original,
which is neither llama.cpp's model nor the hub model.

Here the keys become transformers' rope parameters of the same meaning (`rope_type` linear or yarn; its YaRN is the
same formulas as ggml's rope_yarn, tested against llama.cpp's own logits), set on the config before the model is
built (`configure`; the file's blocks) or its rotary embeddings built again from it (`apply`; transformers' float32
conversion). The fused decode takes cos and sin from that module, so it follows. A scaling transformers cannot
express (YaRN with its own extrapolation or attention factors, DeepSeek's log multiplier, a "longrope" type without
its factors) is refused at load with what it is, never rotated another way.

Phi 3's LongRoPE (Phi-3.5-mini, Phi-4-mini, the 128K Phi-3s) is no key but two tensors: llama.cpp's converter writes
the short and long frequency factors as `rope_factors_short.weight` and `rope_factors_long.weight`, with
`.scaling.attn_factor` (sqrt(1 + ln(scale) / ln(original context)), which multiplies cos and sin) and
`.scaling.original_context_length`. They become transformers' "longrope" parameters. Which factors rotate is the
engine's context's choice, once (`pin_longrope`), as llama.cpp chooses by its n_ctx and vLLM by max_model_len: the
long ones where the context passes the original one. transformers' own rotary would choose per forward, by the
longest position in it, so a row's rotation would depend on its neighbours' lengths, and keys cached before the
sequence passed the original context would be rotated by the other factors than those after.
"""
import logging
import math

from torch import nn

log = logging.getLogger(__name__)

# YaRN keys and the values that mean what transformers computes (llama.cpp's defaults)
YARN_DEFAULTS = {"yarn_ext_factor": 1.0, "yarn_attn_factor": 1.0, "attn_factor": 1.0, "yarn_log_multiplier": 0.0}


LONGROPE_TENSORS = {"long_factor": "rope_factors_long.weight", "short_factor": "rope_factors_short.weight"}


def read(fields: dict, arch: str, context_length: int, factors: dict | None = None) -> dict | None:
    """transformers' rope parameters (without rope_theta) for the GGUF metadata `fields` (name -> value) of an `arch`
    file, or None where it is not scaled; ValueError for a scaling transformers cannot express. `factors`: LongRoPE's
    factors where the file has them (LONGROPE_TENSORS' keys, each a list of floats)."""
    def get(key, default=None):
        return fields.get(f"{arch}.rope.{key}", default)

    if factors:
        if set(factors) != set(LONGROPE_TENSORS):
            raise ValueError(f"this GGUF file has LongRoPE factors {sorted(factors)}, not both "
                             f"{sorted(LONGROPE_TENSORS)}")
        original = int(get("scaling.original_context_length", context_length))
        return {"rope_type": "longrope", **{k: [float(x) for x in v] for k, v in factors.items()},
                "original_max_position_embeddings": original, "factor": max(1.0, context_length / original),
                "attention_factor": float(get("scaling.attn_factor", 1.0))}  # llama.cpp's 1 where the key is missing
    kind = get("scaling.type", "none")
    factor = get("scaling.factor", get("scale_linear"))
    if kind == "none" and get("scale_linear") is not None:
        kind = "linear"
    if kind == "none" or factor is None or math.isclose(factor, 1.0):
        return None
    if kind == "linear":
        return {"rope_type": "linear", "factor": float(factor)}
    if kind != "yarn":
        raise ValueError(f"this GGUF file's rope scaling ({arch}.rope.scaling.type = {kind!r}) is not supported: "
                         f"nsample rotates linear and YaRN scaling as llama.cpp does, and Phi 3's LongRoPE by its "
                         f"factor tensors {sorted(LONGROPE_TENSORS.values())}")
    odd = {k: get(f"scaling.{k}") for k, want in YARN_DEFAULTS.items()
           if get(f"scaling.{k}") is not None and not math.isclose(get(f"scaling.{k}"), want)}
    if get("scaling.alpha") is not None:
        odd["alpha"] = get("scaling.alpha")
    if odd:
        raise ValueError(f"this GGUF file's YaRN rope scaling sets {odd}, which nsample cannot rotate as llama.cpp "
                         f"does (it rotates YaRN with the defaults {YARN_DEFAULTS})")
    params = {"rope_type": "yarn", "factor": float(factor),
              "original_max_position_embeddings": int(get("scaling.original_context_length", context_length))}
    for key in ("beta_fast", "beta_slow"):
        if get(f"scaling.yarn_{key}") is not None:
            params[key] = float(get(f"scaling.yarn_{key}"))
    return params


def configure(config, params: dict | None) -> bool:
    """Set the rope parameters `params` (read's) on a transformers `config`, keeping its rope_theta; whether that
    changed it. A config with parameters per layer type (Gemma 3: sliding and full attention) takes them for its
    full-attention layers, as llama.cpp scales only those (its sliding layers rotate unscaled, on their own base). A
    config already scaled (transformers' GGUF config reads gpt-oss's keys; a float32 conversion made from the
    metadata's config) keeps its own."""
    rope = dict(config.rope_parameters)
    full = rope.get("full_attention") if "rope_theta" not in rope else None
    if params is None or (full or rope).get("rope_type", "default") != "default":
        return False  # not scaled, or scaled already
    if hasattr(config, "original_max_position_embeddings") and "original_max_position_embeddings" in params:
        config.original_max_position_embeddings = params["original_max_position_embeddings"]  # Phi 3's: it wins
    if "rope_theta" in rope:  # keeping its other keys (Phi 3's partial_rotary_factor)
        config.rope_parameters = {**rope, **params}
    elif isinstance(full, dict):
        config.rope_parameters = {**rope, "full_attention": {**params, "rope_theta": full["rope_theta"]}}
    else:
        raise ValueError(f"this GGUF file's rope scaling {params} has no place in its config's rope parameters {rope}")
    return True


def apply(model: nn.Module, params: dict | None) -> None:
    """The same on a model already built: its config, then each rotary embedding made again from it, where that
    changed the config (a conversion made before the scaling was read)."""
    if not configure(model.config, params):
        return
    for name, module in list(model.named_modules()):
        if name.endswith("rotary_emb") and hasattr(module, "config"):
            if module.config is not model.config:
                configure(module.config, params)
            parent_name, _, child = name.rpartition(".")
            device = next(iter(module.buffers())).device
            fresh = type(module)(config=module.config).to(device)
            setattr(model.get_submodule(parent_name) if parent_name else model, child, fresh)


def pin_longrope(model: nn.Module, context: int) -> str | None:
    """Rotate every LongRoPE rotary embedding of `model` by one set of factors at every position: the long ones where
    `context` (the engine's window) passes the original context, else the short ones. Which was pinned ("long",
    "short"), or None where the model has no LongRoPE."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    pinned = None
    for module in model.modules():
        if getattr(module, "rope_type", None) != "longrope" or not hasattr(module, "original_inv_freq"):
            continue
        original = module.config.rope_parameters["original_max_position_embeddings"]
        pinned = "long" if context > original else "short"
        inv_freq = module.original_inv_freq if pinned == "short" else ROPE_INIT_FUNCTIONS["longrope"](
            module.config, module.inv_freq.device, seq_len=original + 1)[0]
        # transformers' update picks long_inv_freq past the original context, original_inv_freq before: both alike
        module.long_inv_freq = module.original_inv_freq = inv_freq.clone()
        module.inv_freq.copy_(inv_freq)
    if pinned == "long":
        log.info("LongRoPE: the long factors turn every position, as the context (%d) passes the original %d; "
                 "max_context=%d takes the short ones", context, original, original)
    return pinned

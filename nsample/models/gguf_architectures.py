"""GGUF architectures llama.cpp runs and transformers has a model for, but whose files transformers' GGUF loading
refuses ("GGUF model with architecture ... is not supported yet"): made known to its tables, once, as the
architecture whose config keys they share.

- SmolLM3 (`smollm3`, SmolLM3-3B): Llama's keys and tensors, its q and k rows permuted for llama.cpp's rotary layout
  as Llama's are (llama.cpp's converter makes it a LlamaModel), and every fourth layer without a rotary embedding,
  which llama.cpp fixes at every fourth (`n_no_rope_layer_step`) and transformers' SmolLM3Config defaults to
  (`no_rope_layer_interval`), so the file needs no key for it.
- Granite (`granite`, IBM's Granite 3): Llama's, q/k permuted alike, with four multipliers of its own (KEYS): the
  embedding's, the residual branches', the attention's scale and the logits' divisor.
- OLMo 2 (`olmo2`, AI2's OLMo 2): Llama's keys, but its q and k rows stay as the checkpoint's (llama.cpp rotates
  them NEOX-style, as transformers does), so its tensors go through the plain processor (PLAIN): with Llama's, which
  permutes them back, a tiny file's logits were 0.5-1.9 from llama.cpp's past the first position.
- OLMo 3 (`olmo2` too, with a sliding window): llama.cpp's converter writes it as OLMo 2 plus
  `attention.sliding_window` and its pattern; transformers has it as its own model, `olmo3`, whose weights have OLMo
  2's names: `specialize` makes such a file's config that model's.
- Mixtral (`llama` with `expert_count`): Llama's file with experts in place of the MLP; `specialize` makes its config
  transformers' Mixtral (whose GGUF loading reads it as a plain Llama and fails on the expert tensors).
- gpt-oss: transformers knows the architecture, but not as its files have it (`_gpt_oss`, `hide_misread_keys`).

Registering adds to transformers' dicts (the config keys' names, the list of architectures it accepts, the tensor
processor) and changes nothing it already had. Both load paths (the file's blocks, transformers' float32
conversion) call `register` before they read a file.
"""
LIKE = {"smollm3": "llama", "granite": "llama", "olmo2": "llama"}  # GGUF architecture -> the one whose config keys
# it shares (and tensor processing, unless PLAIN)
PLAIN = {"olmo2"}  # their tensors renamed only, as the checkpoint's
KEYS = {"granite": {"embedding_scale": "embedding_multiplier", "residual_scale": "residual_multiplier",
                    "logit_scale": "logits_scaling", "attention.scale": "attention_multiplier"}}  # its own, beside
FILE_MODEL = {"olmo3": "olmo2", "mixtral": "llama"}  # transformers model type -> the GGUF architecture (and model
# type) of its files
SWA_PERIOD = 4  # OLMo 3's sliding layers where a file names none: three of every four, as llama.cpp's default


def register() -> None:
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.integrations import ggml

    for arch, like in LIKE.items():
        ggml.GGUF_CONFIG_MAPPING.setdefault(arch, {**ggml.GGUF_CONFIG_MAPPING[like], **KEYS.get(arch, {})})
        if arch not in gguf_utils.GGUF_SUPPORTED_ARCHITECTURES:
            gguf_utils.GGUF_SUPPORTED_ARCHITECTURES.append(arch)
        processor = gguf_utils.TensorProcessor if arch in PLAIN else gguf_utils.TENSOR_PROCESSORS[like]
        gguf_utils.TENSOR_PROCESSORS.setdefault(arch, processor)


def specialize(config, arch: str, get):
    """The config of the model a file of `arch` holds, where it is not the one transformers' GGUF config names or
    not as it reads it (gpt-oss: `_gpt_oss`): an OLMo 2 file with a sliding window is OLMo 3 (its sliding layers from
    the file's pattern, a bool per layer or a period, else three of every four; their rotary base its
    `rope.freq_base_swa`, else the full layers'); `get(key)` reads `{arch}.key`. Else `config` itself."""
    window = get("attention.sliding_window")
    if arch == "gpt-oss":
        return _gpt_oss(config, window)
    if arch == "llama" and get("expert_count"):
        return _mixtral(config, get)
    if arch != "olmo2" or not window:
        return config
    from transformers import Olmo3Config

    layers, pattern = config.num_hidden_layers, get("attention.sliding_window_pattern")
    if isinstance(pattern, list):
        sliding = [bool(p) for p in pattern]
    else:
        period = int(pattern or SWA_PERIOD)
        sliding = [i % period < period - 1 for i in range(layers)]
    if len(sliding) != layers:
        raise ValueError(f"an OLMo 3 file's sliding window pattern has {len(sliding)} layers, not {layers}")
    theta = config.rope_parameters["rope_theta"]
    fields = {k: v for k, v in config.to_dict().items() if k not in ("model_type", "architectures", "rope_parameters")}
    return Olmo3Config(**{**fields, "sliding_window": int(window), "architectures": ["Olmo3ForCausalLM"],
                          "layer_types": ["sliding_attention" if s else "full_attention" for s in sliding],
                          "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": theta},
                                              "sliding_attention": {"rope_type": "default",
                                                                    "rope_theta": get("rope.freq_base_swa") or theta}}})


def _gpt_oss(config, window):
    """A gpt-oss file's config as the file says: transformers' GGUF config keeps GptOssConfig's defaults where the file
    has no key, its YaRN rotary (which it reads from the file where the file has one: rope_scaling.py does that here,
    as llama.cpp reads it) and its window of 128 (it reads `sliding_window`, where the file's key is
    `attention.sliding_window`)."""
    config.rope_parameters = {"rope_type": "default", "rope_theta": config.rope_parameters["rope_theta"]}
    if window:
        config.sliding_window = int(window)
    return config


def hide_misread_keys(reader, arch: str) -> None:
    """Take out of `reader`'s fields (the shared reader transformers' GGUF config reads next: gguf_reading.py) the
    keys it misreads: gpt-oss's `rope.scaling.*`, each of whose values it takes from the field's first part, the
    key's length (a TypeError on every released gpt-oss file, all of which have YaRN keys). rope_scaling.py reads
    them, as for every architecture."""
    if arch == "gpt-oss":
        for key in [k for k in reader.fields if k.startswith(f"{arch}.rope.scaling.")]:
            del reader.fields[key]


def _mixtral(config, get):
    """A Llama file with experts (`expert_count`): Mixtral's, as llama.cpp's converter writes Mixtral (a LlamaModel,
    its experts' size the file's feed_forward_length), which transformers' GGUF config reads as a plain Llama. A file
    that does not say how many experts a token uses is refused, as llama.cpp refuses it."""
    from transformers import MixtralConfig

    if not get("expert_used_count"):
        raise ValueError("this GGUF file has experts (llama.expert_count) but no llama.expert_used_count")
    fields = {k: v for k, v in config.to_dict().items() if k not in ("model_type", "architectures")}
    return MixtralConfig(**{**fields, "architectures": ["MixtralForCausalLM"],
                            "num_local_experts": int(get("expert_count")),
                            "num_experts_per_tok": int(get("expert_used_count"))})

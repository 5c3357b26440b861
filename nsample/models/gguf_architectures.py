"""GGUF architectures llama.cpp runs and transformers has a model for, but whose files transformers' GGUF loading
refuses ("GGUF model with architecture ... is not supported yet"): made known to its tables, once, as the
architecture whose file layout they share.

- SmolLM3 (`smollm3`, SmolLM3-3B): Llama's keys and tensors, its q and k rows permuted for llama.cpp's rotary layout
  as Llama's are (llama.cpp's converter makes it a LlamaModel), and every fourth layer without a rotary embedding,
  which llama.cpp fixes at every fourth (`n_no_rope_layer_step`) and transformers' SmolLM3Config defaults to
  (`no_rope_layer_interval`), so the file needs no key for it.
- Granite (`granite`, IBM's Granite 3): Llama's, q/k permuted alike, with four multipliers of its own (KEYS): the
  embedding's, the residual branches', the attention's scale and the logits' divisor.
Not OLMo 2 (`olmo2`): registered so, a tiny file's logits were 0.5-1.9 from llama.cpp's past the first position, for
a reason not found.

Registering adds to transformers' dicts (the config keys' names, the list of architectures it accepts, the tensor
processor) and changes nothing it already had. Both load paths (the file's blocks, transformers' float32
conversion) call `register` before they read a file.
"""
LIKE = {"smollm3": "llama", "granite": "llama"}  # GGUF architecture -> the one whose config keys
# and tensor processing it shares
KEYS = {"granite": {"embedding_scale": "embedding_multiplier", "residual_scale": "residual_multiplier",
                    "logit_scale": "logits_scaling", "attention.scale": "attention_multiplier"}}  # its own, beside


def register() -> None:
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.integrations import ggml

    for arch, like in LIKE.items():
        ggml.GGUF_CONFIG_MAPPING.setdefault(arch, {**ggml.GGUF_CONFIG_MAPPING[like], **KEYS.get(arch, {})})
        if arch not in gguf_utils.GGUF_SUPPORTED_ARCHITECTURES:
            gguf_utils.GGUF_SUPPORTED_ARCHITECTURES.append(arch)
        gguf_utils.TENSOR_PROCESSORS.setdefault(arch, gguf_utils.TENSOR_PROCESSORS[like])

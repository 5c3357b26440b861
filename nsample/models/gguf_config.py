"""What a GGUF file's metadata says that transformers' GGUF config does not read: sizes, scales and caps it leaves at
its defaults (`read_missing`), read from the file's own keys (`getter`)."""
from nsample.cpu import whole_head_rotary

MISSING = {"head_dim": ("attention.key_length", int), "moe_intermediate_size": ("expert_feed_forward_length", int),
           "shared_expert_intermediate_size": ("expert_shared_feed_forward_length", int),
           "attn_logit_softcapping": ("attn_logit_softcapping", float),
           "final_logit_softcapping": ("final_logit_softcapping", float)}  # config attribute -> (GGUF key, its type)


GEMMA_27B_LAYERS = {"gemma2": 46, "gemma3": 62}  # the 27B models' layers, whose queries scale by hidden / heads


def read_missing(config, reader, arch: str) -> None:
    """Sizes a file stores where transformers' GGUF config reads none for its architecture: the head size (Qwen 3:
    it assumes 128, true of every released Qwen 3 but not of every file), an expert's and a shared expert's MLP
    size (Qwen 2 and 3 MoE: it keeps its defaults, Qwen1.5-MoE-A2.7B's and Qwen3-30B-A3B's), Phi 3's rotary size
    (Phi-4-mini turns 96 of each head's 128); Gemma 2 and 3's attention scale, which the file does not hold and
    transformers' GGUF config leaves at 256: 1/sqrt(head size), or 1/sqrt(hidden / heads) for the 27B models (144 and
    168 where the head size is 128), as llama.cpp and the hub configs have it; Gemma 2's soft caps of its attention
    scores and logits (transformers' GGUF config keeps its defaults, 50 and 30, those of every released Gemma 2,
    where the file says otherwise). Not Phi 3's sliding window
    (Phi-3-mini-4k's 2047): llama.cpp turns it off for Phi files (its PR 13676), and so does transformers' GGUF
    config, which does not read it."""
    get = getter(reader, arch)
    for attr, (key, kind) in MISSING.items():  # the file's own value, where transformers read one too
        if get(key) is not None and hasattr(config, attr):
            setattr(config, attr, kind(get(key)))
    head_dim, _ = whole_head_rotary.rotary_size(config)
    if arch in GEMMA_27B_LAYERS:  # the file has no attention scale: llama.cpp's rule, from gemma_pytorch's configs
        big = config.num_hidden_layers == GEMMA_27B_LAYERS[arch]
        config.query_pre_attn_scalar = config.hidden_size // config.num_attention_heads if big else head_dim
    if config.model_type == "phi3" and get("rope.dimension_count") is not None:
        config.rope_parameters = {**config.rope_parameters,
                                  "partial_rotary_factor": int(get("rope.dimension_count")) / head_dim}


def getter(reader, arch: str):
    """get(key): the value of the file's key `{arch}.key`, None where it has none."""
    def get(key):
        field = reader.fields.get(f"{arch}.{key}")
        return None if field is None else field.contents()
    return get

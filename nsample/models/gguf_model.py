"""A GGUF file loaded as its blocks: transformers' model around the file's own quantized tensors, memory-mapped.

transformers' own GGUF loading dequantizes every tensor to float32 (4 bytes a weight, 4.4 GB for a 1.1B model)
and takes tens of seconds; llama.cpp maps the file and computes on its blocks. So do we:
- the file's metadata becomes a transformers config and tokenizer once (transformers' GGUF parsing, some
  seconds, with what it misses: the rope scaling, a Qwen 3 file's head size), cached with an index of its tensors
  (name, ggml type, shape, offset) in the model cache;
- the model is built on the meta device, so no weight is allocated, and each projection becomes a GGUFLinear on a
  view of the mapped file (gguf_linear.py), the embedding a GGUFEmbedding, a tied LM head the embedding's blocks;
- norms and biases, a few kilobytes a layer, are dequantized to float32 (gguf-py's `dequantize`, as transformers);
- Llama-architecture files store q/k rows permuted for llama.cpp's rotary layout; transformers permutes them
  back, and so do we, a row of blocks at a time (those two tensors are copied, read from the file, and the mapping's
  pages of them made holes, mapping_holes.py; the rest stay mapped);
- a projection in a format the kernels do not read (the ternary TQ1_0 and TQ2_0) is dequantized and rounded
  to Q8_0 at load (gguf-py's quantizer, bitwise llama.cpp's), and reported so (`weights_report`).
- a file's rotary frequency factors (Llama 3's scaling, `rope_freqs.weight`) divide its rotary frequencies, as in
  llama.cpp (rope_factors.py), and its linear or YaRN rope scaling keys set the config's (rope_scaling.py):
  transformers ignores both;
- files that store norms as 1 + w (Gemma 2 and 3) get them shifted by transformers' own processor, and an
  embedding that scales its rows (Gemma's, by sqrt(hidden)) becomes a GGUFEmbedding that scales them alike.
- Qwen 2 and 3 MoE, Mixtral and gpt-oss files keep each expert's projections on its rows of the file's 3-D expert
  tensors (gpt-oss's with their rows of its bias tensors), and their router on its (float32) blocks, where
  transformers fuses the experts into float32 parameters (gguf_experts.py); their expert sizes, which transformers'
  GGUF config does not read, come from the file (gguf_config.py).
Architectures whose tensors transformers transforms beyond that (reshaped convolutions, ...) are not handled here:
`supported()` says no and the caller loads them through transformers' float32 path.
"""
import json
import os
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

from nsample.cpu import gguf_experts, whole_head_rotary
from nsample.cpu.gguf_experts import GGUFExperts, GGUFRouter
from nsample.cpu.gguf_linear import GGUFEmbedding, GGUFLinear, embedding_scale, readable
from nsample.models import gguf_architectures, gguf_config, mapping_holes, model_cache, rope_factors, rope_scaling

INDEX = "gguf_tensors.json"
VERSION = "gguf5"  # of the metadata entries: gguf2 added the rope scaling (rope_scaling.py), gguf3 the experts' sizes,
# gguf4 Phi 3's LongRoPE and partial rotary, Gemma 2 and 3's attention scale, gguf5 Gemma 2's soft caps
OLDER = ("gguf", "gguf2", "gguf3", "gguf4")  # earlier versions' entries, removed when a file's entry is made again
NAMES = "gguf_names.json"
Q8_0 = 8
EXPERT_TENSOR = re.compile(r"\.ffn_(gate_up|gate|up|down)_exps\.(weight|bias)$")  # a layer's experts, (experts,
# rows, row bytes), gate and up apart or fused, and gpt-oss's biases of them, (experts, rows)


def metadata(path: Path, cache: Path) -> Path:
    """A folder with the file's config, tokenizer and tensor index, made once per file (cached under `cache`)."""
    gguf_architectures.register()  # SmolLM3, Granite, OLMo 2, which transformers' GGUF loading does not take itself
    target = cache / f"{path.stem}-{model_cache.key(path)}-{VERSION}"
    if (target / INDEX).is_file():
        return target
    for older in OLDER:
        shutil.rmtree(cache / f"{path.stem}-{model_cache.key(path)}-{older}", ignore_errors=True)
    from gguf import dequantize
    from transformers import AutoConfig, AutoTokenizer

    from nsample.models.gguf_reading import shared_reading

    with shared_reading() as read:  # one reader of the file for the index, the config and the tokenizer
        reader = read(path)
        arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
        rope = {k: f.contents() for k, f in reader.fields.items() if k.startswith(f"{arch}.rope.")}
        context = reader.fields.get(f"{arch}.context_length")
        longrope = {key: dequantize(t.data, t.tensor_type).reshape(-1).tolist() for t in reader.tensors
                    for key, name in rope_scaling.LONGROPE_TENSORS.items() if t.name == name}  # Phi 3's
        index = {"architecture": arch, "tensors": {
            t.name: {"type": int(t.tensor_type), "shape": [int(s) for s in t.data.shape],
                     "offset": int(t.data_offset), "nbytes": int(t.n_bytes)} for t in reader.tensors},
                 "rope_scaling": rope_scaling.read(rope, arch, int(context.contents()) if context else 0, longrope)}
        gguf_architectures.hide_misread_keys(reader, arch)  # gpt-oss's rope scaling: read above, as every file's
        config = gguf_architectures.specialize(AutoConfig.from_pretrained(path.parent, gguf_file=path.name), arch,
                                               gguf_config.getter(reader, arch))  # OLMo 3's, in an OLMo 2 file
        gguf_config.read_missing(config, reader, arch)
        rope_scaling.configure(config, index["rope_scaling"])
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)

    def write(folder: Path) -> None:
        config.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        (folder / INDEX).write_text(json.dumps(index))

    return model_cache.make(target, path, INDEX, write)


def _processor_class(arch: str):
    """transformers' tensor processor class for `arch` if all it does is rename, permute llama's q/k rows (done
    here on the blocks' rows), shift norm weights (Gemma 2 and 3 store 1 + w: done here on the float32 norms, by
    the processor itself) or fuse Qwen 2 and 3 MoE experts (kept apart here, on the blocks: gguf_experts.py), else
    None. (Nemotron's processor does what Gemma's does, but no test covers its files. gpt-oss files, `gpt-oss`, get
    the plain one: transformers' GptOssTensorProcessor is registered as `gpt_oss` and expects expert tensor names
    llama.cpp's converter does not write; their experts are installed here.)"""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    handled = [getattr(gguf_utils, name, None) for name in (
        "TensorProcessor", "LlamaTensorProcessor", "Gemma2TensorProcessor", "Qwen2MoeTensorProcessor")]
    cls = gguf_utils.TENSOR_PROCESSORS.get(arch, gguf_utils.TensorProcessor)
    return cls if cls in handled else None


def supported(path: Path, cache: Path) -> bool:
    arch = json.loads((metadata(path, cache) / INDEX).read_text())["architecture"]
    return _processor_class(arch) is not None


def load(path: Path, cache: Path):
    """(model, tokenizer): the file's model on the CPU, its projections on the mapped file's blocks."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    meta = metadata(path, cache)
    index = json.loads((meta / INDEX).read_text())
    config, tokenizer = AutoConfig.from_pretrained(meta), AutoTokenizer.from_pretrained(meta)
    processor = _processor_class(index["architecture"])(config=config.to_dict())
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    names = _names(meta, lambda: weights_map(model, processor))  # GGUF name -> transformers name
    with warnings.catch_warnings():  # a read-only mapping: torch warns that it is not writable, and it is never written
        warnings.simplefilter("ignore", UserWarning)
        data = torch.from_numpy(np.memmap(path, dtype=np.uint8, mode="r"))
    tensors = {hf: (n, info) for n, info in index["tensors"].items()
               if not EXPERT_TENSOR.search(n) and (hf := names.get(n) or names.get(n.removesuffix(".weight")))}
    # (gpt-oss's attn_sinks.weight: transformers' map names it without .weight)
    if "lm_head.weight" not in tensors and config.tie_word_embeddings:
        tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"]
    turned = _partial_rotary(config, tensors)  # Phi-4-mini's: turned to whole heads (whole_head_rotary.py)
    raws, experts, copied = {}, {}, []
    for gguf_name, info in index["tensors"].items():
        if found := EXPERT_TENSOR.search(gguf_name):  # by layer ("blk.N"): (kind, weight or bias) -> rows, type
            experts.setdefault(gguf_name[:found.start()], {})[found[1], found[2]] = _rows(data, info), info["type"]
    for hf_name, (gguf_name, info) in tensors.items():
        raw = _rows(data, info)
        order = _row_order(processor, gguf_name, len(raw)) if ".attn_q." in gguf_name or ".attn_k." in gguf_name \
            else None  # llama: back to transformers' rotary layout
        if turned and hf_name.endswith(("q_proj.weight", "k_proj.weight", "qkv_proj.weight")):
            turn = whole_head_rotary.qk_rows(config.num_attention_heads, config.num_key_value_heads, *turned, len(raw))
            order = turn if order is None else order[turn]
        if order is not None and not torch.equal(order, torch.arange(len(raw))):  # a copy in that order, read from
            raw = _read_rows(path, info)[order]  # the file, not through the mapping, whose pages of it are made holes
            copied.append((info["offset"], info["nbytes"]))  # below; where the order is the file's own, the mapping's
        raws[hf_name] = raw, info["type"]
    for layer, parts in experts.items():
        _install_experts(model, _experts_module(names, layer), parts)
    for hf_name, (raw, type_id) in raws.items():
        _install(model, hf_name, raw, type_id, raws,
                 lambda w, name=tensors[hf_name][0]: torch.from_numpy(processor.process(w.numpy(), name).weights))
    _rebuild_meta_buffers(model)
    rope_factors.apply(model, rope_factors.read(path, index))  # Llama 3's scaled frequencies
    if turned:
        whole_head_rotary.install(model)
    if isinstance(head := model.get_output_embeddings(), GGUFLinear):
        head.head = True
    mapping_holes.punch(data.data_ptr(), copied)  # not in memory beside their copies, however Linux maps the file
    return model.eval(), tokenizer


def _partial_rotary(config, tensors: dict) -> tuple[int, int] | None:
    """(head size, turned size) where the rotary embedding turns part of each head and its q/k rows can be put in
    whole_head_rotary's order (no bias on them), else None."""
    biased = any(n.endswith(("q_proj.bias", "k_proj.bias", "qkv_proj.bias")) for n in tensors)
    return whole_head_rotary.turnable(config, biased)


def weights_map(model: nn.Module, processor) -> dict[str, str]:
    """transformers' GGUF -> transformers tensor names for `model`, gguf-py's name map built once (gguf_reading.py)."""
    from transformers.modeling_gguf_pytorch_utils import get_gguf_hf_weights_map

    from nsample.models.gguf_reading import shared_reading

    with shared_reading():
        return get_gguf_hf_weights_map(model, processor,
                                       gguf_architectures.FILE_MODEL.get(model.config.model_type))  # OLMo 3: olmo2


def _names(meta: Path, compute) -> dict[str, str]:
    """The GGUF -> transformers tensor names, computed once per file and kept beside the tensor index."""
    path = meta / NAMES
    if path.is_file():
        return json.loads(path.read_text())
    names = compute()
    tmp = path.with_name(f".{NAMES}.{os.getpid()}")
    tmp.write_text(json.dumps(names))
    os.replace(tmp, path)
    return names


def _install(model: nn.Module, hf_name: str, raw: torch.Tensor, type_id: int, raws: dict, process) -> None:
    """Put one file tensor (raw bytes, rows first) in its place in `model`; `raws` has every tensor, by name;
    `process` makes a float32 tensor of it what transformers' tensor processor makes (norms: Gemma's 1 + w)."""
    parent_name, attr = hf_name.rsplit(".", 1)
    module = model.get_submodule(parent_name)
    parent, child = _parent_of(model, parent_name)
    if attr == "weight" and type(module) is nn.Linear:
        bias = raws.get(f"{parent_name}.bias")
        setattr(parent, child, _linear(raw, type_id, module.in_features,
                                       None if bias is None else _dense_raw(*bias).view(-1)))
    elif attr == "weight" and gguf_experts.is_router(module):  # gpt-oss's with a bias
        bias = raws.get(f"{parent_name}.bias")
        linear = _linear(raw, type_id, module.hidden_dim, None if bias is None else _dense_raw(*bias).view(-1))
        setattr(parent, child, gguf_experts.router_of(module, linear))
    elif (attr == "weight" and isinstance(module, nn.Embedding) and readable(type_id, module.embedding_dim)
          and (scale := embedding_scale(module)) is not False):
        setattr(parent, child, GGUFEmbedding(raw, type_id, module.embedding_dim, scale))
    elif attr == "bias" and (type(module) is nn.Linear or isinstance(module, GGUFRouter)):
        return  # taken with its weight
    else:  # norms and the like: small, float32 (and an embedding in a format the kernels do not read)
        old = getattr(module, attr)
        setattr(module, attr, nn.Parameter(process(_dense_raw(raw, type_id)).reshape(old.shape), requires_grad=False))


def _linear(raw: torch.Tensor, type_id: int, K: int, bias: torch.Tensor | None = None) -> GGUFLinear:
    """A projection on `raw`'s blocks (`_readable`)."""
    return GGUFLinear(*_readable(raw, type_id, K), K, bias)


def _readable(raw: torch.Tensor, type_id: int, K: int) -> tuple[torch.Tensor, int]:
    """(`raw`, its type), or Q8_0 blocks rounded from them where the kernels do not read its format."""
    return (raw, type_id) if readable(type_id, K) else (_to_q8_0(raw, type_id, K), Q8_0)


def _experts_module(names: dict[str, str], layer: str) -> str:
    """The transformers module of a layer's experts ("blk.N"): transformers' map names their tensors without .weight,
    gate and up both gate_up_proj (Qwen) or not at all (gpt-oss: only down_proj)."""
    found = [names[f"{layer}.ffn_{kind}_exps"] for kind in gguf_experts.KINDS if f"{layer}.ffn_{kind}_exps" in names]
    if not found:
        raise ValueError(f"{layer}: the file's experts have no module in transformers' model")
    return found[0].rsplit(".", 1)[0]


def _install_experts(model: nn.Module, name: str, parts: dict[tuple[str, str], tuple[torch.Tensor, int]]) -> None:
    """A layer's experts (transformers' module `name`) on the file's ffn_{gate,up,down}_exps rows (or
    ffn_gate_up_exps's and ffn_down_exps's); `parts`: (kind, "weight" or "bias") -> (rows, ggml type)."""
    module = model.get_submodule(name)
    weights = {kind: part for (kind, what), part in parts.items() if what == "weight"}
    if not gguf_experts.is_experts(module) or set(weights) not in ({*gguf_experts.KINDS}, {"gate_up", "down"}):
        raise ValueError(f"{name}: experts of {type(module).__name__} with tensors {sorted(parts)} are not handled")
    E, hidden = module.num_experts, model.config.hidden_size  # gate and up read it; down an expert's size, whichever
    columns = {"gate": hidden, "up": hidden, "gate_up": hidden,  # way round the module holds it
               "down": module.down_proj.numel() // E // hidden}
    tensors = {}
    for kind, (raw, type_id) in weights.items():  # all experts at once, as (experts, rows, row bytes)
        raw, type_id = _readable(raw, type_id, columns[kind])
        tensors[kind] = raw.view(E, -1, raw.shape[-1]), type_id, columns[kind]
    biases = {kind: _dense_raw(raw, type_id).view(E, -1)
              for (kind, what), (raw, type_id) in parts.items() if what == "bias"}
    if "gate_up" in tensors:  # fused: each expert's gate rows, then its up rows; the halves are views, not copies
        raw, *rest = tensors.pop("gate_up")
        tensors["gate"], tensors["up"] = ((half, *rest) for half in raw.chunk(2, dim=1))
    if "gate_up" in biases:
        biases["gate"], biases["up"] = biases.pop("gate_up").chunk(2, dim=1)
    swiglu = (module.alpha, module.limit) if hasattr(module, "limit") else None  # gpt-oss's
    parent, child = _parent_of(model, name)
    setattr(parent, child, GGUFExperts(tensors, module.num_experts, getattr(module, "act_fn", None), biases, swiglu))


def _rows(data: torch.Tensor, info: dict) -> torch.Tensor:
    """A file tensor's bytes as its rows (rows, row bytes): a 3-D one's (experts * rows), a 1-D one as one row."""
    return data[info["offset"]:info["offset"] + info["nbytes"]].view(_row_count(info), -1)


def _read_rows(path: Path, info: dict) -> torch.Tensor:
    """`_rows` read from the file into memory of their own, not the mapping's (for a copy made from them)."""
    return torch.from_numpy(np.fromfile(path, dtype=np.uint8, count=info["nbytes"], offset=info["offset"])).view(
        _row_count(info), -1)


def _row_count(info: dict) -> int:
    shape = info["shape"]
    return int(np.prod(shape[:-1])) if len(shape) > 1 else 1


def _parent_of(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    parent, _, child = name.rpartition(".")
    return (model.get_submodule(parent) if parent else model), child


def _dense_raw(raw: torch.Tensor, type_id: int) -> torch.Tensor:
    from gguf import GGMLQuantizationType, dequantize

    return torch.from_numpy(np.array(dequantize(raw.numpy(), GGMLQuantizationType(type_id)), dtype=np.float32))


def _to_q8_0(raw: torch.Tensor, type_id: int, K: int) -> torch.Tensor:
    """A tensor the kernels cannot read, as Q8_0 blocks (dequantized by gguf-py, rounded by its llama.cpp port)."""
    from gguf import GGMLQuantizationType, quantize

    if K % 32:
        raise ValueError(f"a projection of {K} inputs in ggml type {type_id} cannot be read or rounded to Q8_0")
    w = _dense_raw(raw, type_id).view(len(raw), K).numpy()
    return torch.from_numpy(np.ascontiguousarray(quantize(w, GGMLQuantizationType.Q8_0)))


def _row_order(processor, gguf_name: str, rows: int) -> torch.Tensor:
    """The row permutation transformers' tensor processor applies to `gguf_name` (identity where it applies none)."""
    order = np.arange(rows, dtype=np.int64)[:, None]
    return torch.from_numpy(np.ascontiguousarray(processor.process(order, gguf_name).weights[:, 0]))


def _rebuild_meta_buffers(model: nn.Module) -> None:
    """Modules built on the meta device whose buffers are computed, not loaded (rotary tables), made again on the
    CPU; anything else still on meta is a tensor the file lacks."""
    for name, module in list(model.named_modules()):
        meta = [n for n, b in module.named_buffers(recurse=False) if b.is_meta]
        if any(n.endswith("inv_freq") for n in meta):  # inv_freq, or Gemma 3's one per layer type
            parent, child = _parent_of(model, name)
            setattr(parent, child, type(module)(config=model.config))
        elif "embed_scale" in meta:  # an embedding left float32
            module.embed_scale = torch.tensor(module.scalar_embed_scale)  # Gemma's, as its own init makes it
    missing = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if missing:
        raise ValueError(f"the GGUF file has no tensor for {', '.join(missing[:5])}")

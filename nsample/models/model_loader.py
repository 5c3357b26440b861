"""Finding and loading models: the embedded SmolLM2 GGUF (cached as safetensors), hub ids, folders, .gguf files."""
import json
import math
import shutil
from pathlib import Path

import torch

from nsample.errors import ModelMissing
from nsample.models import model_cache
from nsample.models.embedded import EMBEDDED_NAME, cache_dir, embedded_gguf

TINY_NAME = "nsample/tiny-random"


def resolve_device(device: str) -> torch.device:
    if device != "auto":
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, dtype)


CONVERTED = "f32b"  # of the conversions: f32b took the config of gguf_model.metadata's gguf4 (Phi 3's partial
# rotary, Gemma's attention scale); the unversioned ones before it are removed when a file's conversion is made again


def _converted_folder(gguf: Path) -> Path:
    """Where the float32 conversion of `gguf` is cached (it is there once its config.json is)."""
    return cache_dir() / f"{gguf.stem}-{model_cache.key(gguf)}-{CONVERTED}"


def converted_gguf(gguf: Path) -> Path:
    """A safetensors copy of a GGUF model, converted once (about 20 s) and then loaded in about a second."""
    target = _converted_folder(gguf)
    if (target / "config.json").is_file():
        return target
    shutil.rmtree(cache_dir() / f"{gguf.stem}-{model_cache.key(gguf)}", ignore_errors=True)  # the one before f32b
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from nsample.models import gguf_architectures, gguf_model
    from nsample.models.gguf_reading import shared_reading

    with shared_reading():  # one reader of the file for the metadata, transformers' tokenizer and weights
        config = AutoConfig.from_pretrained(gguf_model.metadata(gguf, cache_dir()))  # with what transformers misses
        file_model = gguf_architectures.FILE_MODEL.get(config.model_type)  # OLMo 3's weights: an OLMo 2's
        model, info = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                           output_loading_info=True,
                                                           **({} if file_model else {"config": config}))
        if info["missing_keys"]:  # left at random (transformers warns, and carries on)
            missing = sorted(info["missing_keys"])
            raise ModelMissing(f"transformers' float32 conversion of {gguf.name} reads no tensor for "
                               f"{len(missing)} of its model's weights ({', '.join(missing[:3])}, ...): it does not "
                               f"read this architecture's files as llama.cpp writes them. Load the file as its own "
                               f"blocks (quantize='auto' or 'gguf', on a CPU with nsample's kernels).")
        if file_model:  # transformers reads the file's tensors by its architecture's model: moved to the config's
            weights, model = model.state_dict(), AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            model.load_state_dict(weights, strict=True)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if hasattr(model.config, "quantization_config"):  # weights are dequantized: save them as plain tensors
        del model.config.quantization_config
    model.hf_quantizer = None

    def write(folder: Path) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    return model_cache.make(target, gguf, "config.json", write)


def model_source(model: str | None) -> tuple[str, str]:
    """(what from_pretrained loads, the served name) for None, a .gguf path, a folder or a hub id."""
    path = gguf_path(model)
    if path is not None:
        return str(converted_gguf(path)), EMBEDDED_NAME if model is None else path.stem
    if Path(model).expanduser().is_dir():
        return str(Path(model).expanduser()), Path(model).name
    return model, model


def gguf_path(model: str | None) -> Path | None:
    """The GGUF file `model` names (None: the embedded one), or None for a folder, hub id or the tiny model."""
    if model is None:
        return embedded_gguf()
    if model.endswith(".gguf"):
        path = Path(model).expanduser()
        if not path.is_file():
            raise ModelMissing(f"No GGUF file at {path}.")
        return path
    return None


def _kernels_missing(device: torch.device, dtype: torch.dtype) -> str | None:
    """Why nsample's C++ kernels cannot decode here (what both as_blocks and as_rows need), or None."""
    from nsample.cpu import kernels

    return ("it needs a CPU" if device.type != "cpu" else
            "it needs float32 activations" if dtype != torch.float32 else
            "nsample's C++ kernels are not available here (they need g++ and ninja)" if kernels.ops() is None else None)


def as_blocks(model: str | None, device: torch.device, dtype: torch.dtype, quantize: str
              ) -> tuple[Path | None, str | None]:
    """(the GGUF file to load as its blocks (gguf_model.py), None), or (None, why not): not a GGUF, not asked, or
    not possible here. quantize="gguf" insists: where it is not possible it is an error, not a silent float32 model."""
    from nsample.models import gguf_model

    path = gguf_path(model) if model != TINY_NAME and quantize in ("auto", "gguf") else None
    why = ("the model is not a .gguf file" if path is None else _kernels_missing(device, dtype) or (
        "this architecture's tensors need transformers' conversion" if not gguf_model.supported(path, cache_dir())
        else None))
    if why and quantize == "gguf":
        raise ValueError(f"quantize='gguf' (decode on the GGUF file's blocks) is not possible: {why}")
    return (None, why) if why else (path, None)


def as_rows(model: str | None, device: torch.device, dtype: torch.dtype, quantize: str) -> bool:
    """Whether a hub model or folder loads as its checkpoint's rows in nsample's kernels (checkpoint_rows.py):
    quantize auto, on a CPU with float32 activations where the kernels build, an architecture the fused decode runs,
    and no AMX (auto's int8 there); quantize="rows" insists, as "gguf" does."""
    from nsample.cpu.fused_decode import FAMILIES
    from nsample.cpu.quantize import resolve_quantize

    def kind() -> str:  # the architecture, from the config alone (a multimodal one's own: its towers stay as loaded)
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(model_source(model)[0]).model_type

    if quantize not in ("auto", "rows") or model == TINY_NAME:
        return False
    why = ("the model is a .gguf file (its blocks load with quantize auto or gguf)" if gguf_path(model) is not None
           else _kernels_missing(device, dtype) or (
               f"the fused decode does not run {arch} models" if (arch := kind()) not in FAMILIES else None))
    if why and quantize == "rows":
        raise ValueError(f"quantize='rows' (the checkpoint's rows in nsample's kernels) is not possible: {why}")
    return why is None and (quantize == "rows" or resolve_quantize("auto", device) == "none")


def check_room_to_convert(gguf: Path, why: str) -> None:
    """ModelMissing where transformers' float32 conversion of `gguf` (4 bytes a weight, in memory and in the cache on
    disk) would not fit in the memory available now or on the cache's disk: a 7B file would otherwise take some
    28 GB and the machine's swap or its OOM killer, where its blocks need its own 4 GB. A cached conversion passes."""
    import psutil

    from nsample.models import gguf_model

    if (_converted_folder(gguf) / "config.json").is_file():
        return
    index = json.loads((gguf_model.metadata(gguf, cache_dir()) / gguf_model.INDEX).read_text())
    need = 4 * sum(math.prod(t["shape"]) for t in index["tensors"].values())
    memory, disk = psutil.virtual_memory().available, shutil.disk_usage(cache_dir()).free
    if need > memory or need > disk:
        gib = 2 ** 30
        raise ModelMissing(
            f"{gguf.name} would load through transformers' float32 conversion, as {why}: that needs about "
            f"{need / gib:.1f} GiB of memory and as much disk for its cache, and {memory / gib:.1f} GiB of memory is "
            f"available, {disk / gib:.1f} GiB of disk free. Where nsample's kernels build, the file loads as its own "
            f"blocks instead (about {gguf.stat().st_size / gib:.1f} GiB); quantize='none' converts it anyway.")


def load_pretrained(model: str | None, device: torch.device, dtype: torch.dtype, quantize: str = "none"):
    """(model, tokenizer, served name), the model in eval mode on `device`; a GGUF file as its own blocks where
    `quantize` (auto or gguf) allows it and the kernels run here, else through transformers' float32 conversion; a
    hub model or folder as its checkpoint's rows in the kernels where `quantize` (auto or rows) allows it (as_rows),
    else as transformers loads it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if model == TINY_NAME:
        from nsample.models.tiny_model import tiny_model

        m, tok = tiny_model()
        return m.to(device=device, dtype=dtype), tok, TINY_NAME
    blocks, why = as_blocks(model, device, dtype, quantize)
    if blocks is None and quantize == "auto" and model != TINY_NAME and (gguf := gguf_path(model)) is not None:
        check_room_to_convert(gguf, why)
    if blocks is not None:
        from nsample.models import gguf_model

        m, tok = gguf_model.load(blocks, cache_dir())
        return m, tok, EMBEDDED_NAME if model is None else blocks.stem
    try:
        rows = as_rows(model, device, dtype, quantize)  # before model_source, which converts a GGUF it names
        source, name = model_source(model)
        tokenizer = AutoTokenizer.from_pretrained(source)
        m = AutoModelForCausalLM.from_pretrained(source, dtype="auto" if rows else dtype)  # rows: as stored
    except OSError as e:
        raise ModelMissing(f"Could not load model '{model}': {e}") from e
    if rows:
        from nsample.cpu.checkpoint_rows import to_rows

        return to_rows(m).eval(), tokenizer, name
    if (gguf := gguf_path(model)) is not None:  # its rope scaling, Llama 3's factors: transformers ignores both
        from nsample.models import gguf_model, rope_factors, rope_scaling

        index = json.loads((gguf_model.metadata(gguf, cache_dir()) / gguf_model.INDEX).read_text())
        rope_scaling.apply(m, index["rope_scaling"])
        rope_factors.apply(m, rope_factors.read(gguf, index))
    return m.to(device).eval(), tokenizer, name

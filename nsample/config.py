"""Engine configuration: one dataclass; `nsample serve` and app.py derive their options from its fields."""
from dataclasses import dataclass

from nsample.options import option


@dataclass(frozen=True)
class EngineConfig:
    """The local engine (or, for a remote one, its admission limits)."""

    model: str | None = option(None, "None = the embedded SmolLM2-135M-Instruct; or a hub id, folder or .gguf, or "
                                     "nsample/tiny-random")
    device: str = option("auto", "auto: cuda, then mps, then cpu")
    dtype: str = option("auto", "auto: bfloat16 on cuda, float32 elsewhere")
    served_model_name: str | None = option(None, "the name clients use; default: derived from `model`")
    max_n: int = option(128, "the largest n one request may ask for")
    max_queue: int = option(64, "requests waiting or running at once before new ones are refused (429)")
    max_queue_per_client: int = option(32, "of those, at most this many from one client (API peer or page session)")
    max_active: int = option(32, "requests decoded together, one batched forward per step")
    kv_budget_gb: float | None = option(None, "KV-cache memory shared by all running requests; None: from free "
                                              "memory")
    prefill_chunk: int = option(256, "prompt tokens prefilled per engine step, so a long prompt never stalls "
                                     "running streams")
    quantize: str = option("auto", "the model's weights: none (as loaded; a .gguf file dequantized to float32 by "
                                   "transformers), int8 (two-level int8 on the CPU's int8 units, near float32), "
                                   "gguf (a .gguf file's own blocks, memory-mapped, decoded in C++), rows (a hub "
                                   "model's or folder's weights as its checkpoint stores them, bf16, f16 or f32, "
                                   "decoded in C++); auto: gguf for a .gguf file on a CPU where nsample's kernels "
                                   "build, else int8 on a CPU with AMX int8 units, else rows for a hub model or "
                                   "folder the fused C++ decode runs, else none",
                           choices=("auto", "none", "int8", "gguf", "rows"))
    decode_activations: str = option("float32", "a GGUF's decode steps: float32 (each block expanded to the "
                                                "float32 weights transformers would load: the float32 model's "
                                                "numbers up to the order of sums) or int8 (each activation row "
                                                "rounded to int8 per block and integer dot products on the blocks, "
                                                "as llama.cpp computes: 2-4x faster decode, but greedy output moves; "
                                                "x86 with AVX2)", choices=("float32", "int8"))
    max_context: int | None = option(None, "cap on the model's context window")
    decode_width: int | None = option(None, "batch invariance: decode every request at a fixed batch width (rows "
                                            "padded to a multiple of it, finished rows kept as padding), so a row's "
                                            "numerics never depend on n or on when its siblings finish; costs the "
                                            "padding; use it where the kernels are not batch-invariant (e.g. GPU "
                                            "batch sizes). None = compact batches")
    shared_prefix: bool | None = option(None, "keep the prompt's KV once and let all rows read it (causal "
                                              "attention, plain or in a sliding window); None = when supported")

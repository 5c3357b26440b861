"""Engine configuration: one dataclass; the CLI and the server derive their options from it."""
from dataclasses import dataclass


@dataclass(frozen=True)
class EngineConfig:
    model: str | None = None  # None = the embedded SmolLM2-135M-Instruct; or a hub id, folder or .gguf
    device: str = "auto"  # auto: cuda, then mps, then cpu
    dtype: str = "auto"  # auto: bfloat16 on cuda, float32 elsewhere
    served_model_name: str | None = None  # the name clients use; default: derived from `model`
    max_n: int = 128  # the largest n one request may ask for
    max_queue: int = 64  # requests waiting or running at once before new ones are refused (429)
    max_queue_per_client: int = 32  # of those, at most this many from one client (API peer or page session)
    max_active: int = 8  # requests decoded together, one batched forward per step
    kv_budget_gb: float | None = None  # KV-cache memory shared by all running requests; None: from free memory
    prefill_chunk: int = 256  # prompt tokens prefilled per engine step, so a long prompt never stalls running streams
    quantize: str = "auto"  # decode weights: none, int8 (weight-only, per channel); auto: the fastest that keeps quality
    max_context: int | None = None  # cap on the model's context window
    # Batch invariance: decode every request at a fixed batch width (rows padded to a multiple of it, finished
    # rows kept as padding), so a row's numerics never depend on n or on when its siblings finish. Costs the
    # padding; use it where the kernels are not batch-invariant (e.g. GPU batch sizes). None = compact batches.
    decode_width: int | None = None
    # Keep the prompt's KV once and let all rows read it (plain causal-attention models); None = when supported.
    shared_prefix: bool | None = None

"""Records what an engine's forwards run: how tests see the batches the engine forms. A decode step is the model's
own forward, or the C++ decoder's call (nsample/cpu/fused_decode.py, quantized models where the kernels run); both are
seen."""
import contextlib


class _Seen:
    """The C++ decoder with its calls seen: decode steps (called) and short prompts' prefills (`prefill`)."""

    def __init__(self, fused, on_prefill, on_decode):
        self._fused, self._on_prefill, self._on_decode = fused, on_prefill, on_decode

    def __call__(self, ids, positions, groups):
        self._on_decode(ids, groups)
        return self._fused(ids, positions, groups)

    def prefill(self, ids, positions, chunks, keep):
        self._on_prefill(ids, chunks)
        return self._fused.prefill(ids, positions, chunks, keep)

    def __getattr__(self, name):
        return getattr(self._fused, name)


@contextlib.contextmanager
def _recording(engine, on_model, on_decode, on_prefill):
    """Call on_model(kwargs) for every model forward, on_decode(ids, groups) for every fused decode step and
    on_prefill(ids, chunks) for every short prompts' prefill in the C++ decoder (where the engine has one: a quantized
    model where the kernels run; `quantize="auto"` quantizes to int8 on a CPU with AMX)."""
    handle = engine.model.model.register_forward_hook(lambda m, args, kwargs, out: on_model(kwargs), with_kwargs=True)
    runner, fused = engine.runner, engine.runner.fused
    if fused is not None:
        runner.fused = _Seen(fused, on_prefill, on_decode)
    try:
        yield
    finally:
        handle.remove()
        runner.fused = fused


@contextlib.contextmanager
def forward_shapes(engine):
    """The input shape of every forward pass (prefill or decode) the engine runs inside the block."""
    shapes = []
    with _recording(engine, lambda kw: shapes.append(tuple(kw["input_ids"].shape)),
                    lambda ids, groups: shapes.append(tuple(ids.shape)),
                    lambda ids, chunks: shapes.append((1, len(ids)))):  # the packed sequence, as the model's (1, T)
        yield shapes


@contextlib.contextmanager
def prefill_packs(engine):
    """For every packed prefill forward inside the block, the lengths of the prompt chunks it ran, in order."""
    packs = []
    with _recording(engine, lambda kw: packs.append([c.stop - c.start for c in kw["nsample_prefill"]])
                    if "nsample_prefill" in kw else None, lambda ids, groups: None,
                    lambda ids, chunks: packs.append([c.stop - c.start for c in chunks])):
        yield packs


@contextlib.contextmanager
def decode_cohorts(engine):
    """For every decode step inside the block, its cohorts in batch order, each as its requests' widths."""
    cohorts = []

    def widths(groups):
        cohorts.append([[s.stop - s.start for s in g.segments] for g in groups])

    with _recording(engine, lambda kw: widths(kw["nsample_batch"]) if "nsample_batch" in kw else None,
                    lambda ids, groups: widths(groups), lambda ids, chunks: None):
        yield cohorts

"""Records what an engine's forwards run: how tests see the batches the engine forms. A decode step is the model's
own forward, or the C++ decoder's call (nsample/cpu/fused_decode.py, quantized models where the kernels run); both are
seen."""
import contextlib


@contextlib.contextmanager
def _recording(engine, on_model, on_decode):
    """Call on_model(kwargs) for every model forward and on_decode(ids, groups) for every fused decode step."""
    handle = engine.model.model.register_forward_hook(lambda m, args, kwargs, out: on_model(kwargs), with_kwargs=True)
    runner, fused = engine.runner, engine.runner.fused
    if fused is not None:
        def decode(ids, positions, groups):
            on_decode(ids, groups)
            return fused(ids, positions, groups)
        runner.fused = decode
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
                    lambda ids, groups: shapes.append(tuple(ids.shape))):
        yield shapes


@contextlib.contextmanager
def prefill_packs(engine):
    """For every packed prefill forward inside the block, the lengths of the prompt chunks it ran, in order."""
    packs = []
    with _recording(engine, lambda kw: packs.append([c.stop - c.start for c in kw["nsample_prefill"]])
                    if "nsample_prefill" in kw else None, lambda ids, groups: None):
        yield packs


@contextlib.contextmanager
def decode_cohorts(engine):
    """For every decode step inside the block, its cohorts in batch order, each as its requests' widths."""
    cohorts = []

    def widths(groups):
        cohorts.append([[s.stop - s.start for s in g.segments] for g in groups])

    with _recording(engine, lambda kw: widths(kw["nsample_batch"]) if "nsample_batch" in kw else None,
                    lambda ids, groups: widths(groups)):
        yield cohorts

"""Records the input shape of every forward pass a model runs: how tests see the batches the engine forms."""
import contextlib


@contextlib.contextmanager
def forward_shapes(model):
    """The input shape of every forward pass the model runs inside the block."""
    shapes = []
    handle = model.model.register_forward_hook(lambda m, args, kwargs, out: shapes.append(
        tuple(kwargs["input_ids"].shape)), with_kwargs=True)
    try:
        yield shapes
    finally:
        handle.remove()


@contextlib.contextmanager
def prefill_packs(model):
    """For every packed prefill forward inside the block, the lengths of the prompt chunks it ran, in order."""
    packs = []
    handle = model.model.register_forward_hook(lambda m, args, kwargs, out: packs.append(
        [c.stop - c.start for c in kwargs["nsample_prefill"]]) if "nsample_prefill" in kwargs else None,
        with_kwargs=True)
    try:
        yield packs
    finally:
        handle.remove()


@contextlib.contextmanager
def decode_cohorts(model):
    """For every decode forward inside the block, its cohorts in batch order, each as its requests' widths."""
    cohorts = []
    handle = model.model.register_forward_hook(lambda m, args, kwargs, out: cohorts.append(
        [[s.stop - s.start for s in g.segments] for g in kwargs["nsample_batch"]]) if "nsample_batch" in kwargs
        else None, with_kwargs=True)
    try:
        yield cohorts
    finally:
        handle.remove()

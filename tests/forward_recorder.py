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

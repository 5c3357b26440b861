"""The local engine: requests in, n seeded choices out, decoded together.

What lives here: `engine` (Engine and `load`, the public entry points), `engine_base` (what the local and the remote
engine share: admission checks, choice groups, seeds), `scheduler` (which requests prefill and decode each step),
`model_runner` (one step of the model over the mixed batch), `request_state` (a running request's rows, its
prefill and its sampled tokens), `cohort`, `kv_cache` and `prefix_attention` (the prompt's KV stored once, each
row's own tokens beside it), `sequence` (a choice's text, stops and finish reason), `sampler` (pure functions on
logits) and `structured` (grammar masks, one matcher a row).

It may import the public modules (`nsample.config`, `errors`, `outputs`, `request`, `sampling_params`),
`nsample.models` and `nsample.cpu`; nothing here imports the server, the page or the remote engine.
`Engine` and `load` are imported on first use, so `nsample.engine.engine_base` works without torch.
"""


def __getattr__(name: str):
    if name in ("Engine", "load"):
        from nsample.engine import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'nsample.engine' has no attribute {name!r}")

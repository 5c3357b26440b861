"""Models and their tokenizers: finding, converting and loading them, and reading their text.

What lives here: `model_loader` (the embedded SmolLM2 GGUF, hub ids, folders and .gguf files), `gguf_model` (a
GGUF file loaded as its blocks), `gguf_reading` (a GGUF file's metadata read once, fast, for a first load),
`gguf_architectures` (architectures transformers' GGUF loading refuses, made known to it), `rope_scaling` and
`rope_factors` (a file's rope scaling, LongRoPE and frequency factors, which transformers ignores),
`tiny_model` (the random Llama the unit tests use), `prompts` (chat templates and prompt token ids), `detokenizer`
(streamed text from token ids) and `token_bytes` (each token's own bytes).

It may import torch, transformers, the public modules and `nsample.cpu`; never `nsample.engine`, the server or the
page.
"""

"""A tiny random Llama with the embedded model's real tokenizer, built in-process for fast tests."""
import torch


def tiny_model(seed: int = 0, layers: int = 2, hidden: int = 64, context: int = 2048):
    """(model, tokenizer): random weights from `seed`, SmolLM2's tokenizer and chat template."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from nsample.models.embedded import cache_dir, embedded_gguf
    from nsample.models.gguf_model import metadata

    tokenizer = AutoTokenizer.from_pretrained(metadata(embedded_gguf(), cache_dir()))
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=context, initializer_range=0.5, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.eval(), tokenizer

"""Fixtures shared across the suite: a tiny causal LM and tokenizer built from a config.

Nothing loads from the Hugging Face hub: the tokenizer is byte-level BPE without merges (every
byte is a token) and the model is a randomly initialised two-layer Llama, small enough that a
GRPO step takes a fraction of a second on a CPU.
"""

import pytest


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[char] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", pad_token="<pad>")
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    return tokenizer


@pytest.fixture
def tiny_causal_lm(tiny_tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tiny_tokenizer.pad_token_id,
        eos_token_id=tiny_tokenizer.eos_token_id,
        bos_token_id=tiny_tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config)

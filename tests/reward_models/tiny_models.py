"""Tiny reward models built from a config and saved to a folder, loaded the way a real checkpoint
is: two-layer Llamas (a sequence classifier, or causal LMs for the DPO reward) with the suite's
byte-level tokenizer, where every character is one token, so inputs can be written out by hand."""

import torch


def llama_config(tokenizer, **extra):
    from transformers import LlamaConfig

    options = {
        "vocab_size": len(tokenizer), "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
        "pad_token_id": tokenizer.pad_token_id, **extra,
    }  # fmt: skip
    return LlamaConfig(**options)


def save_classifier(folder, tokenizer, *, num_labels=1, seed=0, **config):
    """A sequence-classification Llama saved to ``folder``; the model, in eval mode."""
    from transformers import LlamaForSequenceClassification

    torch.manual_seed(seed)
    model = LlamaForSequenceClassification(llama_config(tokenizer, num_labels=num_labels, **config)).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


def save_causal_lm(folder, tokenizer, *, seed):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(tokenizer)).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model

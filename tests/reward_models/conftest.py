"""The tokenizer the tiny reward models of `tiny_models` are saved with."""

import pytest


@pytest.fixture
def tokenizer(tiny_tokenizer):
    """A copy of the suite's tokenizer (tests may change it), with its chat template."""
    from transformers import PreTrainedTokenizerFast

    backend = tiny_tokenizer.backend_tokenizer.__class__.from_str(tiny_tokenizer.backend_tokenizer.to_str())
    copy = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", pad_token="<pad>")
    copy.chat_template = tiny_tokenizer.chat_template
    return copy

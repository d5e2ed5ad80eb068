"""Completions of a fixed set of prompts from the policy being trained, made the way TRL's GRPO
makes its rollouts, for `HackingWatch` to score between steps.

What follows TRL (trl/trainer/grpo_trainer.py, TRL 1.16): the prompt ids as
``GRPOTrainer._tokenize_prompts`` makes them (a chat prompt through the chat template with the
generation prompt, a plain one through the tokenizer), left-padded as in
``_generate_single_turn``; the EOS ids of the model's generation config and the tokenizer's; a
completion kept up to and including its first EOS, as GRPO's ``completion_mask`` keeps it; and a
chat prompt's completion as one assistant message; ``num_generations`` completions per prompt,
which GRPO scores as one group (``GRPOConfig.num_generations``). What does not: decoding is greedy
unless asked otherwise, so that the same policy gives the same completions at every check - and
one completion per prompt, since greedy decoding makes the same one every time. A proxy that
scores a completion against its group (kimi length, pairwise judges, group length control) needs
sampled groups to be watched as the trainer pays it.

An exploit variant's text is tokenized again (`completion_token_ids`), so that a proxy that counts
tokens (``fields["completion_ids"]``, as TRL hands it) measures the variant, not the completion it
was made from.

Generation runs under ``torch.no_grad`` in eval mode (no dropout), and the model is put back in
the mode it was in. Seeded sampling forks the CPU and CUDA random generators, so the training run
draws the same random numbers with or without the watch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rewardlab.optional import require
from rewardlab.rewards.contract import Sample, Text


@dataclass(frozen=True, slots=True)
class WatchSampling:
    """How `HackingWatch` samples the policy on the probe set.

    Attributes:
        max_new_tokens: Longest completion, in tokens. Default 64.
        do_sample: Sample instead of decoding greedily (the default).
        temperature: Sampling temperature, with ``do_sample``.
        seed: Seeds sampling, the same at every check.
        batch_size: Prompts per ``generate`` call.
        num_generations: Completions per prompt, scored together as one group (GRPO's
            ``num_generations``); above 1 needs ``do_sample``. Default 1.
    """

    max_new_tokens: int = 64
    do_sample: bool = False
    temperature: float = 1.0
    seed: int = 0
    batch_size: int = 16
    num_generations: int = 1

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "batch_size", "num_generations"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if not self.temperature > 0:
            raise ValueError(f"temperature must be positive, got {self.temperature!r}")
        if self.num_generations > 1 and not self.do_sample:
            raise ValueError(
                f"num_generations={self.num_generations} needs do_sample=True: greedy decoding makes "
                "the same completion every time"
            )


def sample_policy(
    model: Any, processing_class: Any, probe: Sequence[Sample], sampling: WatchSampling
) -> list[Sample]:
    """The probe samples with the model's completions, and their token ids in
    ``fields["completion_ids"]`` (as TRL hands them to reward functions): ``num_generations``
    samples per probe row, one row's after another. With more than one, a row with an ``id`` gives
    its completions the ids ``<id>#0``, ``<id>#1``, ...; they share the row's prompt and fields,
    hence its group (`Sample.group_key`)."""
    torch = require("torch", "the hacking watch")
    if processing_class is None:
        raise ValueError("the hacking watch needs the trainer's processing_class (a tokenizer)")
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    eos_ids = _eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
    rows = [sample for sample in probe for _ in range(sampling.num_generations)]
    prompts = [_prompt_ids(processing_class, sample.prompt) for sample in rows]
    extra = {"temperature": sampling.temperature} if sampling.do_sample else {}
    device = model.device
    cuda = (
        [torch.cuda.current_device() if device.index is None else device.index]
        if device.type == "cuda"
        else []
    )
    completions: list[list[int]] = []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=cuda):
            torch.manual_seed(sampling.seed)
            for start in range(0, len(prompts), sampling.batch_size):
                batch = prompts[start : start + sampling.batch_size]
                width = max(len(ids) for ids in batch)
                output = model.generate(
                    input_ids=torch.tensor(
                        [[pad_id] * (width - len(ids)) + ids for ids in batch], device=device
                    ),
                    attention_mask=torch.tensor(
                        [[0] * (width - len(ids)) + [1] * len(ids) for ids in batch], device=device
                    ),
                    max_new_tokens=sampling.max_new_tokens,
                    do_sample=sampling.do_sample,
                    pad_token_id=pad_id,
                    eos_token_id=eos_ids,
                    **extra,
                )
                completions += [_through_first_eos(row, eos_ids) for row in output[:, width:].tolist()]
    finally:
        model.train(was_training)
    samples = []
    for index, (sample, completion_ids) in enumerate(zip(rows, completions, strict=True)):
        text = tokenizer.decode(completion_ids, skip_special_tokens=True)
        completion: Text = (
            text if isinstance(sample.prompt, str) else [{"role": "assistant", "content": text}]
        )
        generation = index % sampling.num_generations
        sample_id = (
            f"{sample.id}#{generation}"
            if sample.id is not None and sampling.num_generations > 1
            else sample.id
        )
        samples.append(
            replace(
                sample,
                completion=completion,
                id=sample_id,
                fields={**sample.fields, "completion_ids": completion_ids},
            )
        )
    return samples


def completion_token_ids(processing_class: Any, text: str, honest_ids: Sequence[int]) -> list[int]:
    """The token ids a variant's ``text`` stands for, beside the ``honest_ids`` of the completion
    it was made from: the tokenizer's ids of the text (no special tokens added), then the special
    tokens that end the honest ids (the EOS a finished completion keeps, as in TRL's
    ``completion_ids``), so that a variant is charged its own length and the same ending.

    Decoding and encoding again need not give back the very ids the policy sampled (a word may
    split differently), so the variant's length can differ from the honest one by a token or so
    where the text did not change."""
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
    special = set(getattr(tokenizer, "all_special_ids", ()))
    end = len(honest_ids)
    while end > 0 and honest_ids[end - 1] in special:
        end -= 1
    return ids + list(honest_ids[end:])


def _prompt_ids(processing_class: Any, prompt: Text) -> list[int]:
    if isinstance(prompt, str):
        return list(processing_class(text=prompt)["input_ids"])
    messages = [dict(message) for message in prompt]
    encoded = processing_class.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=True
    )
    return list(encoded["input_ids"])


def _eos_ids(model: Any, tokenizer: Any) -> list[int]:
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [] if configured is None else [configured] if isinstance(configured, int) else list(configured)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.insert(0, tokenizer.eos_token_id)
    if not ids:
        raise ValueError("the hacking watch needs an EOS token id, from the tokenizer or the model")
    return ids


def _through_first_eos(row: list[int], eos_ids: list[int]) -> list[int]:
    for position, token in enumerate(row):
        if token in eos_ids:
            return row[: position + 1]
    return row

"""Token log-probabilities of completions under a causal LM, for many completions of each prompt.

What makes it fast: the prompt runs once and every completion continues from its key-value
cache (best-of-N scores N completions of one prompt); completions go in batches of similar
length under a token budget. Scored one at a time (the CPU default, where batching gains
nothing), completions go in token order, each continuing from the cache of the one before cut
back to the opening they share: completions sampled from one policy often open alike, and a
shared opening runs once. Prompts scored together (`TokenLogprobScorer.grouped_logprobs`) go in
token order the same way: few-shot examples or a system prompt run once for all of them.

What keeps memory bounded: the model's body runs over a batch at once (its hidden states are
small), but the output head - ``length x vocabulary`` logits, 3 GB in float32 for 16k tokens of
a 49k vocabulary - runs over ``chunk_tokens`` positions at a time, each chunk reduced to the
log-probabilities of the actual tokens before the next; a sequence longer than ``body_tokens``
also runs through the body in pieces, through the cache. Models whose head does more than a
projection (logit soft-capping or scaling; checked, not assumed) run whole, in chunks.

Right padding needs no attention mask: under causal attention no real token sees the padding
that follows it, and the padding's own outputs are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.optional import require
from rewardlab.prm.batching import check_max_padding, length_batches
from rewardlab.prm.models import model_lock


def positive_number(name: str, value: Any) -> float:
    """``value`` as a float if it is a finite positive number; a `ValueError` naming ``name``
    otherwise (checked when a reward is built, not at its first batch)."""
    if isinstance(value, bool) or not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class ScoringBudget:
    """How much one forward pass may hold.

    Attributes:
        batch_tokens: Most completion tokens (longest x batch size) in one batch. On a CPU,
            small batches are as fast as large ones; on a GPU, raise it.
        chunk_tokens: Most positions whose logits exist at once (memory: ``chunk_tokens x
            vocabulary`` floats).
        body_tokens: Most positions (batch size x length) through the model's body at once.
        max_padding: Most of a batch that may be padding (a shorter completion joins a batch
            only while the padding stays under this fraction): padding is computed for nothing,
            and on a CPU it costs as much as real tokens.
    """

    batch_tokens: int = 1024
    chunk_tokens: int = 256
    body_tokens: int = 2048
    max_padding: float = 0.1

    def __post_init__(self) -> None:
        if min(self.batch_tokens, self.chunk_tokens, self.body_tokens) < 1:
            raise ValueError("batch_tokens, chunk_tokens and body_tokens must be positive")
        check_max_padding(self.max_padding)


class TokenLogprobScorer:
    """``log p(token | everything before it)`` for each completion token.

    Args:
        model: A transformers causal LM (in eval mode on its device).
        budget: `ScoringBudget`.
        temperature: The logits are divided by it before the softmax: the log-probabilities of
            the distribution sampled at that temperature (1: the model's own).

    Calls hold a lock: a transformers model is not safe to run from several threads at once.
    """

    def __init__(self, model: Any, budget: ScoringBudget | None = None, temperature: float = 1.0):
        self.temperature = positive_number("temperature", temperature)
        self.torch = require("torch", "step rewards from model log-probabilities")
        self.model = model
        self.budget = budget or ScoringBudget()
        self.device = next(model.parameters()).device
        self.body, self.head = model.base_model, model.get_output_embeddings()
        self._lock = model_lock(model)
        self._split = self.body is not model and self.head is not None and self._head_is_a_projection()

    def _head_is_a_projection(self) -> bool:
        """Whether the logits are the head applied to the body's output - not so for models that
        soft-cap or scale them (Gemma, Granite...): checked on a few tokens, not assumed."""
        torch = self.torch
        probe = torch.tensor([[1, 2, 3, 4]], device=self.device)
        with self._lock, torch.inference_mode():
            whole = self.model(input_ids=probe).logits.float()
            split = self.head(self.body(input_ids=probe).last_hidden_state).float()
        return bool(torch.allclose(whole, split, rtol=1e-4, atol=1e-4))

    def completion_logprobs(
        self, prompt_ids: Sequence[int], completions: Sequence[Sequence[int]]
    ) -> list[list[float]]:
        """For one prompt (token ids, at least one) and its completions (token ids), each
        completion's per-token log-probabilities."""
        with self._lock, self.torch.inference_mode():
            results, _ = self._group(list(prompt_ids), completions, None)
        return results

    def grouped_logprobs(
        self, groups: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]]
    ) -> list[list[list[float]] | Exception]:
        """`completion_logprobs` for many prompts, each with its completions. The prompts go in
        token order, each continuing from the cache of the one before cut back to the opening
        they share, so that what prompts share (few-shot examples, a system prompt) runs once.
        A group that fails (an empty prompt, memory, the device) holds its exception in its
        place, without its traceback (whose frames would keep the failed pass's tensors alive);
        the others are scored."""
        results: list[list[list[float]] | Exception] = [[] for _ in groups]
        before: _PromptCache | None = None
        with self._lock, self.torch.inference_mode():
            for index in sorted(range(len(groups)), key=lambda i: list(groups[i][0])):
                prompt_ids = list(groups[index][0])
                if before is not None and not shared_opening(before.ids, prompt_ids):
                    before = None  # nothing to reuse: let the old cache go before the new one is made
                try:
                    results[index], before = self._group(prompt_ids, groups[index][1], before)
                except Exception as error:  # noqa: BLE001 - one group's failure is reported in its place
                    results[index], before = error.with_traceback(None), None
        return results

    def _group(
        self, prompt_ids: list[int], completions: Sequence[Sequence[int]], before: _PromptCache | None
    ) -> tuple[list[list[float]], _PromptCache | None]:
        """One prompt's completions' log-probabilities, and the prompt's cache for the next
        prompt to start from (None when it cannot be cut back)."""
        if not prompt_ids:
            raise ValueError("the prompt has no tokens; a completion's first token needs context")
        results: list[list[float]] = [[] for _ in completions]
        scored = [i for i, ids in enumerate(completions) if ids]
        prompt_cache, last_logits = self._prompt(prompt_ids, before)
        carried = _PromptCache(prompt_ids, prompt_cache) if _can_cut_back(prompt_cache) else None
        lengths = {i: len(completions[i]) for i in scored}
        budget = self.budget
        batches = length_batches(lengths, budget.batch_tokens, budget.max_padding)
        if all(len(batch) == 1 for batch in batches) and carried is not None:
            by_index = {i: list(completions[i]) for i in scored}
            for index, values in self._one_at_a_time(prompt_cache, last_logits, by_index).items():
                results[index] = values
            return results, carried
        for batch in batches:
            rows = [list(completions[i]) for i in batch]
            cache = _copy_cache(prompt_cache, len(rows))
            previous = last_logits.expand(len(rows), -1)
            logprobs, _ = self._extend(cache, previous, rows)
            for index, values in zip(batch, logprobs, strict=True):
                results[index] = values
        return results, carried

    def _prompt(self, ids: list[int], before: _PromptCache | None) -> tuple[Any, Any]:
        """The prompt's key-value cache and the logits after its last token, ``body_tokens``
        positions at a time (only the last position's logits are made). It continues from the
        cache of the prompt ``before`` cut back to the opening the two share (its last token
        runs again when it is all shared, for its logits)."""
        torch = self.torch
        cache, start = None, 0
        if before is not None:
            start = min(shared_opening(before.ids, ids), len(ids) - 1)
            if start:
                cache = before.cache
                _cut_back(cache, start)
        logits = None
        for offset in range(start, len(ids), self.budget.body_tokens):
            chunk = torch.tensor([ids[offset : offset + self.budget.body_tokens]], device=self.device)
            out = self.model(input_ids=chunk, past_key_values=cache, use_cache=True, logits_to_keep=1)
            cache, logits = out.past_key_values, self._scaled(out.logits[:, -1])
        return cache, logits

    def _one_at_a_time(
        self, cache: Any, last_logits: Any, rows: dict[int, list[int]]
    ) -> dict[int, list[float]]:
        """Each row's log-probabilities, the rows run one by one in token order from ``cache``
        (the prompt's, extended and cut back in place): a row continues from the row before it,
        cut back to the tokens they share. The last shared token runs again, as its logits
        (not kept) predict the first new token; a row equal to the one before runs nothing."""
        prompt_length = cache.get_seq_length()
        results: dict[int, list[float]] = {}
        before: list[int] = []
        before_values: list[float] = []
        for index in sorted(rows, key=rows.__getitem__):
            row = rows[index]
            shared = shared_opening(before, row)
            if shared == len(row):
                results[index] = before_values[:shared]
                continue
            kept = max(shared - 1, 0)
            _cut_back(cache, prompt_length + kept)
            if shared:
                logprobs, cache = self._extend(cache, None, [row[kept:]])
                values = before_values[:shared] + logprobs[0]
            else:
                logprobs, cache = self._extend(cache, last_logits, [row])
                values = logprobs[0]
            results[index], before, before_values = values, row, values
        return results

    def _extend(self, cache: Any, previous: Any, rows: list[list[int]]) -> tuple[list[list[float]], Any]:
        """Run ``rows`` (right-padded) on from ``cache``; each row's token log-probabilities (the
        first predicted by ``previous``, the logits before the rows, or left out when it is
        None) and the cache grown by the rows."""
        torch = self.torch
        omitted = 1 if previous is None else 0
        longest = max(len(row) for row in rows)
        padded = torch.tensor([row + [0] * (longest - len(row)) for row in rows], device=self.device)
        start_length = cache.get_seq_length()
        pieces: list[Any] = []
        step = max(1, (self.budget.body_tokens if self._split else self.budget.chunk_tokens) // len(rows))
        for start in range(0, longest, step):
            chunk = padded[:, start : start + step]
            positions = torch.arange(
                start_length + start, start_length + start + chunk.shape[1], device=self.device
            )
            inputs = {
                "input_ids": chunk,
                "past_key_values": cache,
                "use_cache": True,
                "position_ids": positions.unsqueeze(0).expand(len(rows), -1),
            }
            if self._split:
                out = self.body(**inputs)
                previous = self._head_chunks(out.last_hidden_state, chunk, previous, pieces)
            else:
                out = self.model(**inputs)
                previous = _target_logprobs(previous, self._scaled(out.logits), chunk, pieces)
            cache = out.past_key_values
        logprobs = torch.cat(pieces, dim=1).tolist()
        return [values[: len(row) - omitted] for values, row in zip(logprobs, rows, strict=True)], cache

    def _head_chunks(self, hidden: Any, targets: Any, previous: Any, pieces: list[Any]) -> Any:
        """Append to ``pieces`` the log-probabilities of ``targets`` from the body's hidden
        states, the head applied a few positions at a time; returns the last position's logits
        (they predict the next token)."""
        width = max(1, self.budget.chunk_tokens // hidden.shape[0])
        for start in range(0, hidden.shape[1], width):
            logits = self._scaled(self.head(hidden[:, start : start + width]))
            previous = _target_logprobs(previous, logits, targets[:, start : start + width], pieces)
        return previous

    def _scaled(self, logits: Any) -> Any:
        """``logits`` in float32, divided by the temperature."""
        logits = logits.float()
        return logits if self.temperature == 1.0 else logits / self.temperature


def _target_logprobs(previous: Any, logits: Any, targets: Any, pieces: list[Any]) -> Any:
    """Append the log-probabilities of ``targets`` (the first predicted by ``previous``, or left
    out when it is None; each next one by the logits before it) to ``pieces``; return the last
    logits. ``log p = logit - logsumexp(logits)``, so no second vocabulary-sized tensor is made."""
    import torch

    rest = logits[:, :-1]
    later = rest.gather(-1, targets[:, 1:].unsqueeze(-1)).squeeze(-1) - torch.logsumexp(rest, dim=-1)
    if previous is None:
        pieces.append(later)
    else:
        first = previous.gather(-1, targets[:, :1]) - torch.logsumexp(previous, dim=-1, keepdim=True)
        pieces.append(torch.cat([first, later], dim=1))
    return logits[:, -1]


def shared_opening(first: Sequence[int], second: Sequence[int]) -> int:
    """How many tokens ``first`` and ``second`` share from their start."""
    shared = 0
    for a, b in zip(first, second, strict=False):  # they may differ in length
        if a != b:
            break
        shared += 1
    return shared


@dataclass(frozen=True, slots=True)
class _PromptCache:
    """A prompt's token ids and its key-value cache (possibly grown past the prompt since)."""

    ids: list[int]
    cache: Any


def _cut_back(cache: Any, length: int) -> None:
    """Cut ``cache`` back, in place, to its first ``length`` positions."""
    surplus = cache.get_seq_length() - length
    if surplus > 0:
        cache.crop(-surplus)


def _can_cut_back(cache: Any) -> bool:
    """Whether ``cache`` keeps every position, so that cutting it back to a shorter prefix
    leaves exactly that prefix's cache (not so for sliding-window or recurrent layers)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    return isinstance(cache, DynamicCache) and all(type(layer) is DynamicLayer for layer in cache.layers)


def _copy_cache(cache: Any, batch: int) -> Any:
    """A copy of a batch-1 cache repeated ``batch`` times (the forward pass appends to it)."""
    import copy

    copied = copy.deepcopy(cache)
    if batch > 1:
        copied.batch_repeat_interleave(batch)
    return copied

"""Fitting only the score head of a sequence-classification reward model on frozen features: the
CPU-practical way to train a reward model (``rewardlab train-rm --mode head``).

With the backbone frozen, the reward of a sequence is ``score(h)``, where ``h`` is the hidden state
the classifier reads (its last non-padding token). So ``h`` is computed once per sequence, cached
on disk, and the head is fitted on the cached features in seconds with the Bradley-Terry loss.

The features come from the classifier's own forward pass with its ``score`` layer swapped for the
identity: the pooled "logits" are then the very hidden states that ``score`` reads, at the
position the model itself picks (the last token that is not padding, as
``transformers.modeling_layers.GenericForSequenceClassification.forward`` finds it). Recomputing
that position here would drift from the model's rule (a pad token equal to EOS, for one, moves
it); reading it off the model cannot. A model saved with the fitted head therefore gives the
rewards the fit saw.

The loss is TRL's ``RewardTrainer.compute_loss`` (trl/trainer/reward_trainer.py):
``-log sigmoid(r_chosen - r_rejected - margin)``, plus ``center_rewards_coefficient * mean((r_chosen
+ r_rejected) ** 2)`` when asked. Features are divided by their root mean square per dimension
while fitting (AdamW's steps are then alike across dimensions); the scale is folded back into the
head's weights, so the saved head reads raw hidden states.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rewardlab.optional import require

#: Bump when the features of the same model and sequences would change (how they are computed).
_FEATURES_VERSION = 1


def pooled_outputs(model: Any, sequences: Sequence[Sequence[int]], *, pad_id: int, batch_size: int) -> Any:
    """The classifier's pooled output (``logits``, ``N x outputs``, float32 on the CPU) for each
    token sequence: right-padded batches of similar lengths, in eval mode without gradients, as
    the ``reward_model`` reward runs it. The model's training mode is restored after."""
    torch = require("torch", "reward-model training")
    device = next(model.parameters()).device
    order = sorted(range(len(sequences)), key=lambda index: len(sequences[index]))
    rows: list[Any] = [None] * len(sequences)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                longest = max(len(sequences[index]) for index in batch)
                ids = [
                    list(sequences[index]) + [pad_id] * (longest - len(sequences[index])) for index in batch
                ]
                mask = [
                    [1] * len(sequences[index]) + [0] * (longest - len(sequences[index])) for index in batch
                ]
                out = model(
                    input_ids=torch.tensor(ids, device=device),
                    attention_mask=torch.tensor(mask, device=device),
                    use_cache=False,
                )
                for index, row in zip(batch, out.logits.float().cpu(), strict=True):
                    rows[index] = row
    finally:
        model.train(was_training)
    return torch.stack(rows) if rows else torch.zeros(0, 0)


@contextlib.contextmanager
def head_removed(model: Any) -> Iterator[None]:
    """``model`` with its ``score`` layer replaced by the identity, so that its pooled output is
    the hidden state the head reads; a model without a linear ``score`` layer is refused."""
    torch = require("torch", "reward-model training")
    head = getattr(model, "score", None)
    if not isinstance(head, torch.nn.Linear):
        raise ValueError(
            f"{type(model).__name__}: head mode fits a linear 'score' layer on the last token "
            "(decoder classifiers such as Llama, Qwen, Mistral, GPT-2), and this model has none; "
            "use mode full or lora"
        )
    model.score = torch.nn.Identity()
    try:
        yield
    finally:
        model.score = head


def model_fingerprint(folder: Path) -> str:
    """A hash of a model folder's config and weights: what its features depend on."""
    digest = hashlib.blake2b(digest_size=16)
    files = sorted(
        path
        for path in folder.iterdir()
        if path.name == "config.json" or path.suffix in (".safetensors", ".bin")
    )
    for path in files:
        digest.update(path.name.encode())
        with path.open("rb") as file:
            digest.update(hashlib.file_digest(file, "blake2b").digest())
    return digest.hexdigest()


def cached_features(
    model: Any,
    sequences: Sequence[Sequence[int]],
    *,
    model_key: str,
    pad_id: int,
    batch_size: int,
    cache: Path | None,
) -> Any:
    """The hidden states the head reads for each sequence (``N x hidden``), from ``cache`` when
    it holds them for this model (``model_key``) and these very token ids, else computed and
    saved there. ``cache=None`` computes without saving."""
    safetensors = require("safetensors.torch", "reward-model training")
    path = None
    if cache is not None:
        digest = hashlib.blake2b(digest_size=20)
        digest.update(json.dumps([_FEATURES_VERSION, model_key, list(map(list, sequences))]).encode())
        path = cache / f"{digest.hexdigest()}.safetensors"
        if path.is_file():
            return safetensors.load_file(str(path))["features"]
    with head_removed(model):
        features = pooled_outputs(model, sequences, pad_id=pad_id, batch_size=batch_size)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: a run stopped halfway leaves no truncated cache entry.
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".partial")
        os.close(handle)
        safetensors.save_file({"features": features.contiguous()}, temporary)
        os.replace(temporary, path)
    return features


def fit_head(
    head: Any,
    chosen: Any,
    rejected: Any,
    margins: Any | None,
    *,
    epochs: int,
    learning_rate: float,
    batch_size: int,
    weight_decay: float,
    center_rewards_coefficient: float | None,
    seed: int,
    after_epoch: Callable[[int, float], None],
) -> None:
    """Fit ``head`` (a ``torch.nn.Linear`` with one output) in place on the features of the
    chosen and rejected answers (``N x hidden`` each) with the Bradley-Terry loss, in shuffled
    mini-batches of ``batch_size`` pairs with AdamW; ``after_epoch(epoch, mean_loss)`` is called
    after each epoch (1-based) with the head as it then is."""
    torch = require("torch", "reward-model training")
    scale = torch.cat([chosen, rejected]).pow(2).mean(0).sqrt().clamp_min(1e-6)
    chosen, rejected = chosen / scale, rejected / scale
    with torch.no_grad():
        head.weight.mul_(scale)  # the same rewards on the scaled features
    head.requires_grad_(True)
    optimizer = torch.optim.AdamW(head.parameters(), lr=learning_rate, weight_decay=weight_decay)
    generator = torch.Generator().manual_seed(seed)
    try:
        for epoch in range(1, epochs + 1):
            losses = []
            for batch in torch.randperm(len(chosen), generator=generator).split(batch_size):
                loss = bradley_terry_loss(
                    head(chosen[batch]).squeeze(-1),
                    head(rejected[batch]).squeeze(-1),
                    None if margins is None else margins[batch],
                    center_rewards_coefficient,
                )
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item() * len(batch))
            with torch.no_grad():
                head.weight.div_(scale)
            after_epoch(epoch, sum(losses) / len(chosen))
            with torch.no_grad():
                head.weight.mul_(scale)
    finally:
        with torch.no_grad():
            head.weight.div_(scale)
        head.requires_grad_(False)


def bradley_terry_loss(
    chosen: Any, rejected: Any, margins: Any | None, center_rewards_coefficient: float | None
) -> Any:
    """TRL's reward loss on the rewards of the two answers of each pair (see the module)."""
    torch = require("torch", "reward-model training")
    difference = chosen - rejected if margins is None else chosen - rejected - margins
    loss = -torch.nn.functional.logsigmoid(difference).mean()
    if center_rewards_coefficient is not None:
        loss = loss + center_rewards_coefficient * torch.mean((chosen + rejected) ** 2)
    return loss

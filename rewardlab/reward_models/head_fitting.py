"""Fitting only the score head of a sequence-classification reward model on frozen features: the
CPU-practical way to train a reward model (``rewardlab train-rm --mode head``).

With the backbone frozen, the reward of a sequence is ``score(h)``, where ``h`` is the hidden state
the classifier reads (its last non-padding token). So ``h`` is computed once per sequence, cached
on disk as it is computed (`FeatureStore`), and the head is fitted on the cached features in
seconds with the Bradley-Terry loss.

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
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rewardlab.optional import require
from rewardlab.sqlite_file import SqliteFile

#: Bump when the features of the same model and sequences would change (how they are computed).
_FEATURES_VERSION = 2


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


class FeatureStore(SqliteFile):
    """Head mode's feature cache: one row per sequence, keyed by the model (`model_fingerprint`)
    and the sequence's token ids, its hidden state stored as float32 bytes.

    Per sequence rather than per file, and written batch by batch as the features are computed:
    a run stopped after hours loses only the batch in progress, a new run on more pairs (or on
    the dev pairs of another run) computes only the sequences it has not seen, and several runs
    can share the file (`SqliteFile`: WAL mode)."""

    schema = "CREATE TABLE IF NOT EXISTS features (key TEXT PRIMARY KEY, vector BLOB NOT NULL);"

    def get(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        with self._lock:
            connection = self._connect()
            for start in range(0, len(keys), 500):  # SQLite's bound on query parameters
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, vector FROM features WHERE key IN ({marks})"
                found.update(connection.execute(query, chunk).fetchall())
        return found

    def put(self, rows: Sequence[tuple[str, bytes]]) -> None:
        with self._lock:
            connection = self._connect()
            connection.execute("BEGIN")
            connection.executemany("INSERT OR REPLACE INTO features VALUES (?, ?)", rows)
            connection.execute("COMMIT")


#: Called after each batch of features computed: (sequences done, sequences to compute,
#: tokens computed so far). Sequences found in the cache are not counted.
OnFeatures = Callable[[int, int, int], None]


def cached_features(
    model: Any,
    sequences: Sequence[Sequence[int]],
    *,
    model_key: str,
    pad_id: int,
    batch_size: int,
    cache: Path | None,
    on_progress: OnFeatures | None = None,
) -> Any:
    """The hidden states the head reads for each sequence (``N x hidden``), from the
    `FeatureStore` in ``cache`` where it holds them for this model (``model_key``) and those
    very token ids, the rest computed (shortest first, in batches of ``batch_size``) and saved
    there as they come. ``cache=None`` computes without saving."""
    torch = require("torch", "reward-model training")
    keys = [_feature_key(model_key, ids) for ids in sequences]
    store = FeatureStore(cache / "features.sqlite") if cache is not None else None
    stored = store.get(keys) if store is not None else {}
    rows: list[Any] = [None] * len(sequences)
    for index, key in enumerate(keys):
        if key in stored:
            rows[index] = torch.frombuffer(bytearray(stored[key]), dtype=torch.float32)
    missing = sorted(
        (index for index, row in enumerate(rows) if row is None), key=lambda i: len(sequences[i])
    )
    tokens = 0
    try:
        with head_removed(model):
            for start in range(0, len(missing), batch_size):
                batch = missing[start : start + batch_size]
                pooled = pooled_outputs(
                    model, [sequences[i] for i in batch], pad_id=pad_id, batch_size=batch_size
                )
                for index, row in zip(batch, pooled, strict=True):
                    rows[index] = row.contiguous()
                if store is not None:
                    store.put([(keys[index], rows[index].numpy().tobytes()) for index in batch])
                tokens += sum(len(sequences[index]) for index in batch)
                if on_progress is not None:
                    on_progress(start + len(batch), len(missing), tokens)
    finally:
        if store is not None:
            store.close()
    return torch.stack(rows) if rows else torch.zeros(0, 0)


def _feature_key(model_key: str, ids: Sequence[int]) -> str:
    digest = hashlib.blake2b(digest_size=20)
    digest.update(json.dumps([_FEATURES_VERSION, model_key, list(ids)]).encode())
    return digest.hexdigest()


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

"""Preference pairs as a reward model reads them: each answer with its prompt as token ids,
rendered as the ``reward_model`` reward renders a sample (`rendering.conversation_ids`), so that a
model is trained on the very inputs it will be scored on (see `rewardlab.reward_models.training`
for why the trainer does not tokenize them itself); and the loss and accuracies of rewards given
to them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.errors import DataFormatError, InvalidInput
from rewardlab.optional import require
from rewardlab.reward_models.head_fitting import bradley_terry_loss, pooled_outputs
from rewardlab.reward_models.pair_accuracy import PairAccuracy, pair_accuracy
from rewardlab.reward_models.preferences import PreferencePair, Side
from rewardlab.reward_models.rendering import conversation_ids, has_chat_template


@dataclass(frozen=True)
class TokenizedPairs:
    """Pairs as the reward model reads them, and the pairs left out for their length."""

    pairs: list[PreferencePair]
    chosen: list[list[int]]
    rejected: list[list[int]]
    too_long: int

    @property
    def sequences(self) -> list[list[int]]:
        """The chosen answers, then the rejected ones."""
        return self.chosen + self.rejected

    def margins(self) -> Any | None:
        if self.pairs[0].margin is None:
            return None
        torch = require("torch", "reward-model training")
        return torch.tensor([pair.margin for pair in self.pairs])

    def accuracy(self, chosen: Sequence[float], rejected: Sequence[float]) -> PairAccuracy:
        return pair_accuracy(
            chosen,
            rejected,
            [pair.answer_length("chosen") for pair in self.pairs],
            [pair.answer_length("rejected") for pair in self.pairs],
        )

    def record(self, chosen: Any, rejected: Any) -> dict[str, Any]:
        """The loss (with margins, without centering) and accuracies of rewards for these pairs."""
        accuracy = self.accuracy(chosen.tolist(), rejected.tolist())
        loss = bradley_terry_loss(chosen, rejected, self.margins(), None).item()
        return {"loss": loss, **accuracy.to_dict()}

    def rewards(self, model: Any, pad_id: int, batch_size: int) -> tuple[Any, Any]:
        """The model's rewards for the chosen and the rejected answers."""
        outputs = pooled_outputs(model, self.sequences, pad_id=pad_id, batch_size=batch_size)[:, 0]
        return outputs[: len(self.pairs)], outputs[len(self.pairs) :]


def tokenize_pairs(pairs: Sequence[PreferencePair], tokenizer: Any, limit: int | None) -> TokenizedPairs:
    """Each pair's answers as the ``reward_model`` reward reads them (see the module docstring),
    leaving out pairs with an answer over ``limit`` tokens (``None``: no limit). A pair that
    cannot be rendered is a `DataFormatError` naming its row and field."""
    templated = has_chat_template(tokenizer)
    kept, chosen, rejected = [], [], []
    for pair in pairs:
        ids = {side: _answer_ids(pair, side, tokenizer, templated) for side in ("chosen", "rejected")}
        if limit is None or max(len(ids["chosen"]), len(ids["rejected"])) <= limit:
            kept.append(pair)
            chosen.append(ids["chosen"])
            rejected.append(ids["rejected"])
    return TokenizedPairs(kept, chosen, rejected, len(pairs) - len(kept))


def _answer_ids(pair: PreferencePair, side: Side, tokenizer: Any, templated: bool) -> list[int]:
    try:
        ids = conversation_ids(pair.sample(side), tokenizer, chat_template=templated, append_eos=True)
    except InvalidInput as error:
        field = side if error.field_name == "completion" else error.field_name
        reason = str(error).removeprefix(f"{error.field_name}: ")
        raise DataFormatError(f"{pair.where}: field {field!r}: {reason}") from None
    if not ids:
        raise DataFormatError(f"{pair.where}: field {side!r}: no tokens")
    return ids

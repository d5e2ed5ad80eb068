"""The pairs a bias probe reads: a prompt and two answers, labelled or not, and who wrote each.

One JSON object per line, in either shape:

- **labelled**, as ``rewardlab train-rm`` reads preferences (`rewardlab.reward_models.preferences`):
  ``prompt``, ``chosen``, ``rejected``; the writers, when known, in ``chosen_model`` and
  ``rejected_model`` (as in the AlpacaEval pairs of ``shared/data/preferences``);
- **unlabelled**: ``prompt``, ``response_a``, ``response_b`` (the names the pairwise judge's
  template gives them); the writers in ``model_a`` and ``model_b`` (Chatbot Arena's names).

Answers are text or chat messages. Without ``prompt`` (an implicit prompt), the prompt is what the
two answers share at the start, as TRL's ``extract_prompt`` (``trl/data_utils.py``) takes it: the
longest common prefix of the two texts (short of the space before the first difference) or of the
two conversations' messages, so that a probe rewrites the answers, not the conversation before
them. ``id`` names the pair in reports (default ``line-N``).
Every other column is ignored. Like preference training, and unlike ``rewardlab score``, the probe
refuses a file at its first bad row: a pair dropped without a word changes the flip rates. The
error (`DataFormatError`) names the file, the line and the field.

Not `rewardlab.reward_models.preferences.read_preferences` itself: it keeps neither the ids nor
who wrote each answer, and it reads labelled pairs only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.errors import DataFormatError
from rewardlab.reward_models.preferences import text_field
from rewardlab.rewards.contract import Text, message_text

#: The two shapes of a pair: its answer columns and the columns naming who wrote them.
LABELLED = (("chosen", "rejected"), ("chosen_model", "rejected_model"))
UNLABELLED = (("response_a", "response_b"), ("model_a", "model_b"))


@dataclass(frozen=True, slots=True)
class BiasPair:
    """Two answers to one prompt.

    Attributes:
        id: How reports name the pair.
        prompt: The prompt, as text or chat messages (an implicit prompt split off the answers).
        a: The first answer: ``chosen`` in a labelled pair, else ``response_a``.
        b: The second: ``rejected``, or ``response_b``.
        labelled: Whether the data says ``a`` is the better answer (a labelled pair).
        model_a: Who wrote ``a``, when the pair says.
        model_b: Who wrote ``b``, when the pair says.
        where: How errors name the pair: ``FILE: line N``.
    """

    id: str
    prompt: Text
    a: Text
    b: Text
    labelled: bool
    model_a: str | None = None
    model_b: str | None = None
    where: str = "pair"

    def text(self, side: str) -> str:
        """The plain text of answer ``"a"`` or ``"b"``."""
        return message_text(self.a if side == "a" else self.b)


def read_pairs(path: str | Path, limit: int | None = None) -> list[BiasPair]:
    """The pairs of a JSONL file, at most ``limit`` of them.

    Raises:
        DataFormatError: the file cannot be read, a line is not JSON or not a pair (naming the
            line and the field), or it holds no pair.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise DataFormatError(f"{path}: {error.strerror or error}") from None
    pairs: list[BiasPair] = []
    for number, line in enumerate(lines, start=1):
        if limit is not None and len(pairs) >= limit:
            break
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataFormatError(f"{where}: not JSON: {error.msg}") from None
        pairs.append(_pair(record, where, f"line-{number}"))
    if not pairs:
        raise DataFormatError(f"{path}: no pairs")
    return pairs


def _pair(record: Any, where: str, default_id: str) -> BiasPair:
    if not isinstance(record, Mapping):
        raise DataFormatError(
            f"{where}: expected an object with a pair of answers, got {type(record).__name__}"
        )
    labelled = "chosen" in record or "rejected" in record
    if not labelled and "response_a" not in record and "response_b" not in record:
        columns = ", ".join(map(str, record)) or "none"
        raise DataFormatError(
            f"{where}: no answers: expected fields 'chosen' and 'rejected', or 'response_a' and "
            f"'response_b' (columns: {columns})"
        )
    (first, second), (writer_a, writer_b) = LABELLED if labelled else UNLABELLED
    a, b = text_field(record, first, where), text_field(record, second, where)
    if record.get("prompt") is None:
        prompt, a, b = _split_implicit_prompt(a, b, where)
    else:
        prompt = text_field(record, "prompt", where)
    identifier = record.get("id")
    if identifier is not None and (isinstance(identifier, bool) or not isinstance(identifier, str | int)):
        raise DataFormatError(f"{where}: field 'id': must be text or an integer, got {identifier!r}")
    return BiasPair(
        id=default_id if identifier is None else str(identifier),
        prompt=prompt,
        a=a,
        b=b,
        labelled=labelled,
        model_a=_writer(record, writer_a, where),
        model_b=_writer(record, writer_b, where),
        where=where,
    )


def _split_implicit_prompt(a: Text, b: Text, where: str) -> tuple[Text, Text, Text]:
    """The shared start of two answers as the prompt, and the rest of each (TRL's extract_prompt;
    unlike it, one answer that is all prefix of the other is an error, not a split one short)."""
    if isinstance(a, str) != isinstance(b, str):
        return "", a, b
    shared = 0
    while shared < min(len(a), len(b)) and a[shared] == b[shared]:
        shared += 1
    if isinstance(a, str) and 0 < shared < min(len(a), len(b)) and a[shared - 1] == " ":
        shared -= 1  # the space before the first difference stays with the answers, as in TRL
    if shared == len(a) or shared == len(b):
        raise DataFormatError(f"{where}: the two answers do not differ after what they share (the prompt)")
    return a[:shared], a[shared:], b[shared:]


def _writer(record: Mapping[str, Any], field: str, where: str) -> str | None:
    value = record.get(field)
    if value is not None and not isinstance(value, str):
        raise DataFormatError(f"{where}: field {field!r}: must be a model name (text), got {value!r}")
    return value or None

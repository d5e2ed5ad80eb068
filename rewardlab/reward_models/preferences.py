"""Preference pairs for reward-model training: ``prompt`` / ``chosen`` / ``rejected`` rows, and an
optional ``margin``, from a JSONL file, a Parquet file or a dataset saved with ``save_to_disk``,
in either of TRL's formats: standard (text) or conversational (lists of chat messages). The
prompt may be left out when chosen and rejected are whole conversations (TRL's implicit prompt).

Unlike ``rewardlab score``, which records a bad row and goes on, training refuses a file at its
first bad row: a pair dropped without a word changes what the model learns. The error
(`DataFormatError`) names the file, the row (the line, in JSONL) and the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rewardlab.errors import DataFormatError
from rewardlab.optional import require
from rewardlab.rewards.contract import Sample, Text, message_text

Side = Literal["chosen", "rejected"]
_JSONL = (".jsonl", ".ndjson")
_PARQUET = (".parquet", ".pq")


@dataclass(frozen=True, slots=True)
class PreferencePair:
    """One preference: ``chosen`` is the better answer to ``prompt`` than ``rejected``.

    Attributes:
        prompt: The prompt, as text or chat messages (empty with an implicit prompt).
        chosen: The preferred answer, as text or chat messages.
        rejected: The other answer.
        margin: How much better ``chosen`` is, when the data says (TRL's ``margin`` column):
            the loss asks the chosen reward to exceed the rejected one by it.
        where: How errors name the pair: ``FILE: line N`` or ``FILE: row N``.
    """

    prompt: Text
    chosen: Text
    rejected: Text
    margin: float | None = None
    where: str = "pair"

    def sample(self, side: Side) -> Sample:
        """The prompt with one of the answers, as the ``reward_model`` reward scores it."""
        return Sample(prompt=self.prompt, completion=self.chosen if side == "chosen" else self.rejected)

    def answer_length(self, side: Side) -> int:
        """Characters of one answer's text (its assistant messages, for a conversation)."""
        return len(message_text(self.chosen if side == "chosen" else self.rejected))


def read_preferences(path: str | Path, *, margin_column: str | None = "margin") -> list[PreferencePair]:
    """The pairs of a JSONL or Parquet file (by its suffix) or of a saved dataset (a folder);
    ``margin_column`` holds each pair's margin (``None``: margins are not read).

    Raises:
        DataFormatError: the file cannot be read, a row is not a preference pair (naming the row
            and the field), some rows have a margin and others not, or there is no pair.
    """
    path = Path(path)
    if not path.exists():
        raise DataFormatError(f"{path}: no such file or folder")
    if path.is_dir():
        records = _dataset_records(path)
    elif path.suffix.lower() in _JSONL:
        records = _jsonl_records(path)
    elif path.suffix.lower() in _PARQUET:
        records = _parquet_records(path)
    else:
        raise DataFormatError(
            f"{path}: not a preference file: expected {', '.join(_JSONL + _PARQUET)}, "
            "or a folder saved with Dataset.save_to_disk"
        )
    pairs = [_pair(record, where, margin_column) for where, record in records]
    if not pairs:
        raise DataFormatError(f"{path}: no preference pairs")
    with_margin = [pair.margin is not None for pair in pairs]
    if any(with_margin) and not all(with_margin):
        first = pairs[with_margin.index(False)]
        raise DataFormatError(f"{first.where}: field {margin_column!r}: missing, while other rows have one")
    return pairs


def _jsonl_records(path: Path) -> Iterator[tuple[str, Any]]:
    with path.open("rb") as file:
        for number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                yield f"{path}: line {number}", json.loads(line)
            except ValueError as error:
                raise DataFormatError(f"{path}: line {number}: not JSON: {error}") from None


def _parquet_records(path: Path) -> Iterator[tuple[str, Any]]:
    pa = require("pyarrow", "reading Parquet preference files")
    pq = require("pyarrow.parquet", "reading Parquet preference files")
    try:
        rows = pq.read_table(path).to_pylist()
    except (OSError, pa.ArrowException) as error:
        raise DataFormatError(f"{path}: not a readable Parquet file: {error}") from None
    for index, record in enumerate(rows):
        yield f"{path}: row {index}", record


def _dataset_records(path: Path) -> Iterator[tuple[str, Any]]:
    datasets = require("datasets", "reading saved preference datasets")
    try:
        loaded = datasets.load_from_disk(str(path))
    except (OSError, ValueError) as error:
        raise DataFormatError(f"{path}: not a dataset saved with save_to_disk: {error}") from None
    if isinstance(loaded, datasets.DatasetDict):
        if len(loaded) != 1:
            raise DataFormatError(
                f"{path}: a DatasetDict with splits {', '.join(loaded)}; give one split's folder "
                f"(e.g. {path / next(iter(loaded))})"
            )
        (loaded,) = loaded.values()
    for index, record in enumerate(loaded):
        yield f"{path}: row {index}", record


def _pair(record: Any, where: str, margin_column: str | None) -> PreferencePair:
    if not isinstance(record, Mapping):
        raise DataFormatError(
            f"{where}: expected an object with chosen and rejected, got {type(record).__name__}"
        )
    chosen, rejected = text_field(record, "chosen", where), text_field(record, "rejected", where)
    prompt = text_field(record, "prompt", where) if record.get("prompt") is not None else ""
    margin = record.get(margin_column) if margin_column is not None else None
    if margin is not None and (
        isinstance(margin, bool) or not isinstance(margin, int | float) or not math.isfinite(margin)
    ):
        raise DataFormatError(f"{where}: field {margin_column!r}: must be a finite number, got {margin!r}")
    return PreferencePair(prompt, chosen, rejected, None if margin is None else float(margin), where)


def text_field(record: Mapping[str, Any], field: str, where: str) -> Text:
    """``record[field]`` as text or chat messages; a `DataFormatError` naming ``where`` and the
    field otherwise."""
    value = record.get(field)
    if value is None:
        raise DataFormatError(f"{where}: field {field!r}: missing (columns: {', '.join(map(str, record))})")
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(_is_message(message) for message in value):
        return value
    raise DataFormatError(
        f"{where}: field {field!r}: must be text or a non-empty list of chat messages "
        f"({{'role': ..., 'content': ...}}), got {_shape(value)}"
    )


def _is_message(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("role"), str)
        and isinstance(value.get("content"), str | list | type(None))
    )


def _shape(value: Any) -> str:
    if isinstance(value, list):
        return "an empty list" if not value else f"a list holding {type(value[0]).__name__}"
    return type(value).__name__

"""Input rows for offline scoring: JSONL, Parquet, or a Hugging Face dataset saved on disk.

Rows are read lazily (JSONL line by line, Parquet and datasets by record batch), so a
million-row file never sits in memory. A row that cannot become a `Sample` - malformed JSON, a
line that is not an object, a missing or mistyped prompt/completion - is not an exception: it
comes back as a `Row` whose `error` names the line (or row) and the field, and the run writes it
to the output instead of stopping.

Ids: a row's id comes from the id column (strings as they are, integers as their decimal text).
A row without one gets ``row-<index>``, its 0-based position among the input's rows; resuming
such a run by id is only sound while the input's row order does not change.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rewardlab.errors import InputError
from rewardlab.optional import require
from rewardlab.rewards.contract import REFERENCE_COLUMNS, Sample, Text

Format = Literal["jsonl", "parquet", "dataset"]
FORMATS: tuple[Format, ...] = ("jsonl", "parquet", "dataset")
_SUFFIX_FORMATS: dict[str, Format] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}
# Parquet and datasets are read in record batches of this many rows: large enough to amortise
# Arrow's conversion, small enough to keep memory flat.
_READ_BATCH_ROWS = 1024


@dataclass(frozen=True, slots=True)
class Columns:
    """Which input columns hold each part of a `Sample`; every other column goes to ``fields``.

    Attributes:
        prompt: The prompt column (a string or chat messages). Default ``"prompt"``.
        completion: The completion column (a string or chat messages). Default ``"completion"``.
        reference: The reference column. Default: in each row, the first present of
            `REFERENCE_COLUMNS` (reference, answer, solution, ground_truth, gold, target), the
            same rule as the TRL adapter; a row with none of them has no reference.
        id: The optional id column; absent means ``row-<index>``. Default ``"id"``.
    """

    prompt: str = "prompt"
    completion: str = "completion"
    reference: str | None = None
    id: str = "id"

    @property
    def required(self) -> tuple[str, str]:
        return (self.prompt, self.completion)

    def reference_in(self, record: Mapping[str, Any]) -> str | None:
        """The column of ``record`` that holds its reference, if any."""
        if self.reference is not None:
            return self.reference
        taken = (self.prompt, self.completion, self.id)
        return next((c for c in REFERENCE_COLUMNS if c in record and c not in taken), None)


@dataclass(frozen=True, slots=True)
class RowError:
    """Why a row could not become a sample.

    Attributes:
        message: What is wrong, e.g. ``missing field 'completion'``.
        field: The column at fault; ``None`` when the row is not an object at all.
    """

    message: str
    field: str | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """One input row: a sample, or the error that kept it from being one.

    Attributes:
        index: 0-based position among the input's rows (blank JSONL lines are not rows).
        line: 1-based line number in a JSONL file; ``None`` for Parquet and datasets.
        id: The sample's id, or ``row-<index>`` when the row has none (or an unusable one).
        sample: The sample to score; ``None`` exactly when ``error`` is set.
        error: Why the row is unusable.
    """

    index: int
    line: int | None
    id: str
    sample: Sample | None = None
    error: RowError | None = None

    @property
    def location(self) -> str:
        """How messages refer to the row: ``line 7`` in JSONL, ``row 6`` elsewhere."""
        return f"line {self.line}" if self.line is not None else f"row {self.index}"


@dataclass(slots=True)
class RowSource:
    """The rows of one input, read lazily.

    Attributes:
        rows: The rows, in input order; iterable once.
        total: How many rows the input holds, when known without reading it (not for JSONL).
    """

    rows: Iterator[Row]
    total: int | None

    def __iter__(self) -> Iterator[Row]:
        return self.rows


class _FieldError(Exception):
    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message


def _text(record: Mapping[str, Any], column: str) -> Text:
    value = record.get(column)
    if value is None:
        raise _FieldError(column, f"missing field {column!r}")
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(message, Mapping) for message in value):
        return value
    raise _FieldError(
        column, f"field {column!r} must be a string or a list of chat messages, got {type(value).__name__}"
    )


def _reference(record: Mapping[str, Any], column: str | None) -> str | None:
    if column is None:
        return None
    value = record.get(column)
    if value is None or isinstance(value, str):
        return value
    # Numeric gold answers (``answer: 42``) are common; bool is an int but never an answer.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise _FieldError(column, f"field {column!r} must be a string or a number, got {type(value).__name__}")


def _explicit_id(record: Mapping[str, Any], column: str) -> str | None:
    value = record.get(column)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _FieldError(column, f"field {column!r} must be a string or an integer, got {type(value).__name__}")


def row_from_record(record: Any, columns: Columns, index: int, line: int | None = None) -> Row:
    """A `Row` from one decoded record; every problem becomes the row's error, never an exception."""
    fallback_id = f"row-{index}"
    if not isinstance(record, Mapping):
        error = RowError(f"expected a JSON object, got {type(record).__name__}")
        return Row(index, line, fallback_id, error=error)
    try:
        row_id = _explicit_id(record, columns.id) or fallback_id
    except _FieldError as problem:
        return Row(index, line, fallback_id, error=RowError(problem.message, problem.field))
    reference_column = columns.reference_in(record)
    mapped = {columns.prompt, columns.completion, columns.id, reference_column}
    try:
        sample = Sample(
            prompt=_text(record, columns.prompt),
            completion=_text(record, columns.completion),
            reference=_reference(record, reference_column),
            id=row_id,
            fields={key: value for key, value in record.items() if key not in mapped},
        )
    except _FieldError as problem:
        return Row(index, line, row_id, error=RowError(problem.message, problem.field))
    return Row(index, line, row_id, sample=sample)


def _jsonl_rows(path: Path, columns: Columns) -> Iterator[Row]:
    index = 0
    # Binary mode: a line that is not valid UTF-8 is one bad row, not a decode error for the file.
    with path.open("rb") as file:
        for line, raw in enumerate(file, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError as error:
                yield Row(index, line, f"row-{index}", error=RowError(f"malformed JSON: {error}"))
            else:
                yield row_from_record(record, columns, index, line)
            index += 1


def _records_rows(batches: Iterable[list[dict[str, Any]]], columns: Columns) -> Iterator[Row]:
    index = 0
    for records in batches:
        for record in records:
            yield row_from_record(record, columns, index)
            index += 1


def _check_columns(path: Path, names: Iterable[str], columns: Columns) -> None:
    names = list(names)
    missing = [column for column in columns.required if column not in names]
    if missing:
        raise InputError(
            f"{path}: no column {missing[0]!r} (columns: {', '.join(names)}); "
            "map columns with --prompt-column / --completion-column"
        )


def _parquet_source(path: Path, columns: Columns) -> RowSource:
    pa = require("pyarrow", "reading Parquet input")
    pq = require("pyarrow.parquet", "reading Parquet input")

    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as error:
        raise InputError(f"{path}: not a readable Parquet file: {error}") from error
    _check_columns(path, parquet.schema_arrow.names, columns)
    batches = (batch.to_pylist() for batch in parquet.iter_batches(batch_size=_READ_BATCH_ROWS))
    return RowSource(_records_rows(batches, columns), parquet.metadata.num_rows)


def _dataset_source(path: Path, columns: Columns, split: str | None) -> RowSource:
    datasets = require("datasets", "reading a saved dataset")

    try:
        loaded = datasets.load_from_disk(str(path))
    except (OSError, ValueError) as error:
        raise InputError(f"{path}: not a dataset saved with save_to_disk: {error}") from error
    if isinstance(loaded, datasets.DatasetDict):
        splits = list(loaded)
        if split is None and len(splits) == 1:
            split = splits[0]
        if split not in loaded:
            wanted = "choose one with --split" if split is None else f"no split {split!r}"
            raise InputError(f"{path}: {wanted} (splits: {', '.join(splits)})")
        dataset = loaded[split]
    elif split is not None:
        raise InputError(f"{path}: --split {split!r} given, but this is a single dataset without splits")
    else:
        dataset = loaded
    _check_columns(path, dataset.column_names, columns)
    batches = (
        [dict(zip(batch, values, strict=True)) for values in zip(*batch.values(), strict=True)]
        for batch in dataset.iter(batch_size=_READ_BATCH_ROWS)
    )
    return RowSource(_records_rows(batches, columns), len(dataset))


def detect_format(path: Path) -> Format:
    """The input format from the path: a directory is a saved dataset, else the file suffix."""
    if path.is_dir():
        return "dataset"
    detected = _SUFFIX_FORMATS.get(path.suffix.lower())
    if detected is None:
        known = ", ".join(_SUFFIX_FORMATS)
        raise InputError(f"{path}: cannot tell the format from the suffix (known: {known}); pass --format")
    return detected


def open_rows(
    path: str | Path, *, format: Format | None = None, columns: Columns = Columns(), split: str | None = None
) -> RowSource:
    """Open an input for reading rows; problems with the input as a whole raise `InputError` now.

    Args:
        path: A JSONL file, a Parquet file, or a directory written by ``Dataset.save_to_disk``.
        format: ``"jsonl"``, ``"parquet"`` or ``"dataset"``; default from the path.
        columns: Which columns hold prompt, completion, reference and id.
        split: The split of a saved ``DatasetDict``; may be omitted when it has just one.

    Example:
        >>> source = open_rows("rollouts.jsonl", columns=Columns(completion="response"))  # doctest: +SKIP
        >>> [row.sample for row in source if row.error is None]  # doctest: +SKIP
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    format = format or detect_format(path)
    if format not in FORMATS:
        raise InputError(f"unknown format {format!r}; one of: {', '.join(FORMATS)}")
    if format != "dataset" and split is not None:
        raise InputError(f"--split applies to saved datasets, not to {format} input")
    if format == "dataset":
        return _dataset_source(path, columns, split)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a {format} file")
    if format == "parquet":
        return _parquet_source(path, columns)
    return RowSource(_jsonl_rows(path, columns), None)

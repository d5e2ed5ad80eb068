"""Benchmark files read into records, and the records' fields checked, for every benchmark.

Benchmarks publish their data in a handful of layouts - a JSON list of records, a JSON object
of columns (``Dataset.to_dict()``), JSONL, Parquet, a directory saved with ``datasets``'
``save_to_disk``, or a directory of such files, one per subset or split. They are read here,
in one place, so that every benchmark accepts the same layouts and names a malformed file the
same way: each `Record` carries ``where`` (the file and its line, record or row), and the field
checks put it and the field in every `DataFormatError`. What a benchmark's records mean - its
fields, its ids, its subsets - stays in the benchmark's module.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardlab.benchmarks.items import Item
from rewardlab.errors import DataFormatError
from rewardlab.optional import require
from rewardlab.rewards.contract import Score, Status, Text


@dataclass(frozen=True, slots=True)
class Record:
    """One record of a benchmark file.

    Attributes:
        data: Its fields.
        where: How errors name it: the file and the line, record or row.
        split: The split of a saved ``DatasetDict`` it came from; None otherwise.
    """

    data: Mapping[str, Any]
    where: str
    split: str | None = None


def read_records(path: Path) -> list[Record]:
    """The records of a JSON file (a list of records, or an object of equal-length columns), a
    JSONL file, a Parquet file, or a directory saved with ``datasets``' ``save_to_disk``; the
    file's suffix tells which (``.jsonl``, ``.parquet``, anything else JSON)."""
    if path.is_dir():
        records = list(_saved_dataset(path))
    elif not path.is_file():
        raise DataFormatError(f"{path}: no such file or directory")
    elif path.suffix == ".parquet":
        records = _parquet(path)
    elif path.suffix == ".jsonl":
        records = list(_jsonl(path))
    else:
        records = list(_json(path))
    return _objects(records)


def read_jsonl(path: Path) -> list[Record]:
    """The records of a JSONL file, whatever its name (a file rewardlab wrote as JSONL)."""
    return _objects(list(_jsonl(path)))


def read_record_files(path: Path, suffix: str, *, saved_datasets: bool) -> list[tuple[str, list[Record]]]:
    """The records of a benchmark that keeps a subset or split per file, each group named.

    ``path`` is one file (named by its stem), a directory whose ``*<suffix>`` files are read in
    name order (each named by its stem; other files are ignored), or - with ``saved_datasets``
    - a directory saved with ``save_to_disk``, told apart by the ``dataset_dict.json`` or
    ``dataset_info.json`` it holds, whose splits are the groups (a saved ``Dataset`` is one,
    named after the directory). Files are read by `read_records`.
    """
    if path.is_dir() and not (saved_datasets and _is_saved_dataset(path)):
        files = sorted(path.glob(f"*{suffix}"))
        if not files:
            raise DataFormatError(f"{path}: no {suffix} files in this directory")
        return [(file.stem, read_records(file)) for file in files]
    records = read_records(path)
    if not path.is_dir():
        return [(path.stem, records)]
    groups: dict[str, list[Record]] = {}
    for record in records:
        groups.setdefault(record.split or path.name, []).append(record)
    return list(groups.items())


def _is_saved_dataset(path: Path) -> bool:
    return (path / "dataset_dict.json").is_file() or (path / "dataset_info.json").is_file()


def _objects(records: list[Record]) -> list[Record]:
    """``records``, or a `DataFormatError` naming the first that is not an object."""
    for record in records:
        if not isinstance(record.data, Mapping):
            raise DataFormatError(f"{record.where}: expected an object, got {type(record.data).__name__}")
    return records


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise DataFormatError(f"{path}: {error.strerror or error}") from None


def _jsonl(path: Path) -> Iterator[Record]:
    for number, line in enumerate(_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield Record(json.loads(line), f"{path}, line {number}")
        except json.JSONDecodeError as error:
            raise DataFormatError(f"{path}, line {number}: not JSON ({error.msg})") from None


def _json(path: Path) -> Iterator[Record]:
    try:
        loaded = json.loads(_text(path))
    except json.JSONDecodeError as error:
        raise DataFormatError(f"{path}: not JSON ({error.msg}, line {error.lineno})") from None
    if isinstance(loaded, list):
        yield from (Record(record, f"{path}, record {index}") for index, record in enumerate(loaded))
        return
    if not isinstance(loaded, dict):
        raise DataFormatError(
            f"{path}: expected a list of records or an object of columns, got {type(loaded).__name__}"
        )
    # An object of columns (``Dataset.to_dict()``); its scalar entries (the model's name) are
    # file-level metadata.
    columns = {key: value for key, value in loaded.items() if isinstance(value, list)}
    if not columns:
        raise DataFormatError(
            f"{path}: expected a list of records or an object of columns, got an object without columns"
        )
    lengths = {len(column) for column in columns.values()}
    if len(lengths) != 1:
        raise DataFormatError(
            f"{path}: expected an object of equal-length columns, got column lengths "
            f"{ {key: len(value) for key, value in columns.items()} }"
        )
    for index in range(lengths.pop()):
        yield Record({key: column[index] for key, column in columns.items()}, f"{path}, row {index}")


def _parquet(path: Path) -> list[Record]:
    parquet = require("pyarrow.parquet", "reading a Parquet benchmark file")
    try:
        rows = parquet.read_table(path).to_pylist()
    except (OSError, ValueError) as error:
        raise DataFormatError(f"{path}: not a Parquet file: {error}") from None
    return [Record(row, f"{path}, row {index}") for index, row in enumerate(rows)]


def _saved_dataset(path: Path) -> Iterator[Record]:
    datasets = require("datasets", "reading a saved benchmark dataset")
    try:
        loaded = datasets.load_from_disk(str(path))
    except (OSError, ValueError) as error:
        raise DataFormatError(f"{path}: not a dataset saved with save_to_disk: {error}") from None
    if isinstance(loaded, datasets.DatasetDict):
        for split, dataset in loaded.items():
            for index, row in enumerate(dataset):
                yield Record(row, f"{path}, split {split!r}, row {index}", split)
    else:
        yield from (Record(row, f"{path}, row {index}") for index, row in enumerate(loaded))


def shown(data: Mapping[str, Any], key: str) -> str:
    """Field ``key`` as an error shows it: its value's repr (cut to 80 characters), or that it
    is missing - absent or null, which Parquet and saved datasets give for a missing field."""
    return "nothing (missing)" if data.get(key) is None else repr(data[key])[:80]


def required_field(data: Mapping[str, Any], key: str, where: str) -> Any:
    """The value of field ``key``, or a `DataFormatError` naming ``where`` and the field."""
    if data.get(key) is None:
        raise DataFormatError(f"{where}: field {key!r} is missing")
    return data[key]


def text_field(data: Mapping[str, Any], key: str, where: str) -> str:
    """The string in field ``key``, or a `DataFormatError` naming ``where`` and the field."""
    value = data.get(key)
    if not isinstance(value, str):
        raise DataFormatError(f"{where}: field {key!r}: expected a string, got {shown(data, key)}")
    return value


def texts_field(data: Mapping[str, Any], key: str, where: str, count: int | None = None) -> list[str]:
    """The non-empty list of strings in field ``key`` (of exactly ``count`` when given)."""
    value = data.get(key)
    wanted = f"a list of {count} strings" if count else "a non-empty list of strings"
    if (
        not isinstance(value, list)
        or not value
        or (count is not None and len(value) != count)
        or not all(isinstance(text, str) for text in value)
    ):
        raise DataFormatError(f"{where}: field {key!r}: expected {wanted}, got {shown(data, key)}")
    return value


def prompt_field(data: Mapping[str, Any], where: str) -> Text:
    """The ``prompt``: a string, or chat messages (``role`` and ``content`` each)."""
    prompt = data.get("prompt")
    if isinstance(prompt, str):
        return prompt
    if (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(m, Mapping) and "role" in m and "content" in m for m in prompt)
    ):
        return [dict(message) for message in prompt]
    raise DataFormatError(
        f"{where}: field 'prompt': expected a string or chat messages, got {shown(data, 'prompt')}"
    )


def published_number(value: Any, where: str) -> float:
    """A published score: a finite number, or a list of one (some models return one-element
    lists)."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DataFormatError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def published_score(value: Any, where: str) -> Score:
    """A published score as a `Score`: `published_number`'s value, or a failed score for NaN.

    The reference scripts write their scores with ``json.dumps``, which writes a model's NaN as
    ``NaN``; their comparisons (``chosen > rejected``) count such a score as a loss, and so
    does a failed score here, where refusing the whole file would compute no figure at all."""
    number = value[0] if isinstance(value, list) and len(value) == 1 else value
    if isinstance(number, float) and math.isnan(number):
        return Score.failure(Status.ERROR, f"{where}: NaN in the published file")
    return Score(value=published_number(value, where))


def unique_items(items: list[Item], path: Path) -> list[Item]:
    """``items``, or a `DataFormatError` naming an id that occurs twice."""
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise DataFormatError(f"{path}: item id {item.id!r} occurs more than once")
        seen.add(item.id)
    return items

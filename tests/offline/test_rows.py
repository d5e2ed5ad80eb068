"""Reading JSONL, Parquet and saved datasets into rows: column mapping, chat rows, row errors."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rewardlab.offline import Columns, InputError, open_rows
from rewardlab.offline.rows import row_from_record

CHAT_PROMPT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
CHAT_COMPLETION = [{"role": "assistant", "content": "4"}]


def write_jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_jsonl_rows_keep_line_numbers_ids_and_extra_fields(tmp_path):
    path = write_jsonl(
        tmp_path / "in.jsonl",
        [
            json.dumps({"id": "a", "prompt": "p", "completion": "c", "reference": "r", "group": 3}),
            "",
            json.dumps({"id": 7, "prompt": CHAT_PROMPT, "completion": CHAT_COMPLETION, "reference": 4}),
            json.dumps({"prompt": "p2", "completion": "c2"}),
        ],
    )
    rows = list(open_rows(path))

    assert [(row.index, row.line, row.id) for row in rows] == [(0, 1, "a"), (1, 3, "7"), (2, 4, "row-2")]
    assert all(row.error is None for row in rows)
    first, chat, no_id = (row.sample for row in rows)
    assert (first.prompt, first.completion, first.reference, first.id) == ("p", "c", "r", "a")
    assert first.fields == {"group": 3}
    assert chat.prompt == CHAT_PROMPT and chat.completion_text == "4" and chat.reference == "4"
    assert no_id.reference is None and no_id.id == "row-2" and no_id.fields == {}


def test_jsonl_bad_lines_become_row_errors_naming_line_and_field(tmp_path):
    path = write_jsonl(
        tmp_path / "in.jsonl",
        [
            json.dumps({"id": "ok-1", "prompt": "p", "completion": "c"}),
            '{"id": "torn", "prompt": "p", "compl',
            "[1, 2]",
            json.dumps({"id": "no-completion", "prompt": "p"}),
            json.dumps({"id": "bad-prompt", "prompt": 5, "completion": "c"}),
            json.dumps({"id": "bad-messages", "prompt": "p", "completion": ["not", "messages"]}),
            json.dumps({"id": ["x"], "prompt": "p", "completion": "c"}),
            json.dumps({"id": "bad-reference", "prompt": "p", "completion": "c", "reference": True}),
            json.dumps({"id": "ok-2", "prompt": "p", "completion": "c"}),
        ],
    )
    rows = list(open_rows(path))

    errors = {row.line: (row.id, row.error.field, row.error.message) for row in rows if row.error}
    assert errors[2][:2] == ("row-1", None) and errors[2][2].startswith("malformed JSON")
    assert errors[3] == ("row-2", None, "expected a JSON object, got list")
    assert errors[4] == ("no-completion", "completion", "missing field 'completion'")
    assert errors[5][:2] == ("bad-prompt", "prompt") and "got int" in errors[5][2]
    assert errors[6][:2] == ("bad-messages", "completion")
    assert errors[7][:2] == ("row-6", "id")
    assert errors[8][:2] == ("bad-reference", "reference")
    assert [row.id for row in rows if row.error is None] == ["ok-1", "ok-2"]
    assert rows[3].location == "line 4"


def test_jsonl_line_that_is_not_utf8_is_one_row_error(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"prompt": "\xff", "completion": "c"}\n{"prompt": "p", "completion": "c"}\n')
    first, second = open_rows(path)
    assert first.error is not None and first.error.message.startswith("malformed JSON")
    assert second.error is None


def test_column_mapping_moves_other_columns_into_fields(tmp_path):
    path = write_jsonl(
        tmp_path / "in.jsonl",
        [json.dumps({"uid": "u1", "question": "q", "response": "r", "answer": "a", "prompt": "kept"})],
    )
    columns = Columns(prompt="question", completion="response", reference="answer", id="uid")
    (row,) = open_rows(path, columns=columns)
    assert (row.sample.prompt, row.sample.completion, row.sample.reference, row.id) == ("q", "r", "a", "u1")
    assert row.sample.fields == {"prompt": "kept"}


def test_parquet_rows_with_chat_columns_and_nulls(tmp_path):
    table = pa.table(
        {
            "id": ["a", "b", "c"],
            "prompt": [CHAT_PROMPT, CHAT_PROMPT, CHAT_PROMPT],
            "completion": [CHAT_COMPLETION, None, [{"role": "assistant", "content": "five"}]],
            "topic": ["math", "math", "art"],
        }
    )
    path = tmp_path / "in.parquet"
    pq.write_table(table, path, row_group_size=2)
    source = open_rows(path)

    assert source.total == 3
    a, b, c = source
    assert a.sample.prompt == CHAT_PROMPT and a.sample.completion_text == "4" and a.line is None
    assert a.sample.fields == {"topic": "math"}
    assert (b.error.field, b.error.message, b.location) == (
        "completion",
        "missing field 'completion'",
        "row 1",
    )
    assert c.sample.completion_text == "five" and c.index == 2


def test_parquet_without_the_mapped_column_is_an_input_error(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(pa.table({"prompt": ["p"], "response": ["r"]}), path)
    with pytest.raises(InputError, match=r"no column 'completion' \(columns: prompt, response\)"):
        open_rows(path)
    (row,) = open_rows(path, columns=Columns(completion="response"))
    assert row.sample.completion == "r" and row.id == "row-0"


def test_saved_dataset_and_dataset_dict_splits(tmp_path):
    records = [{"id": f"s{i}", "prompt": "p", "completion": "c" * i} for i in range(5)]
    datasets.Dataset.from_list(records).save_to_disk(tmp_path / "single")
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(records), "test": datasets.Dataset.from_list(records[:2])}
    ).save_to_disk(tmp_path / "dict")

    single = open_rows(tmp_path / "single")
    assert single.total == 5
    assert [row.sample.completion for row in single] == ["c" * i for i in range(5)]
    test_split = open_rows(tmp_path / "dict", split="test")
    assert [row.id for row in test_split] == ["s0", "s1"]
    with pytest.raises(InputError, match=r"choose one with --split \(splits: train, test\)"):
        open_rows(tmp_path / "dict")
    with pytest.raises(InputError, match="no split 'dev'"):
        open_rows(tmp_path / "dict", split="dev")
    with pytest.raises(InputError, match="single dataset without splits"):
        open_rows(tmp_path / "single", split="train")


def test_dataset_dict_with_one_split_needs_no_split_name(tmp_path):
    rows = [{"prompt": "p", "completion": "c"}]
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(tmp_path / "d")
    (row,) = open_rows(tmp_path / "d")
    assert row.sample.completion == "c"


def test_input_level_problems_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        open_rows(tmp_path / "missing.jsonl")
    (tmp_path / "in.csv").write_text("prompt,completion\n")
    with pytest.raises(InputError, match="pass --format"):
        open_rows(tmp_path / "in.csv")
    (tmp_path / "fake.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        open_rows(tmp_path / "fake.parquet")
    with pytest.raises(InputError, match="--split applies to saved datasets"):
        open_rows(tmp_path / "in.csv", format="jsonl", split="train")


def test_explicit_format_overrides_the_suffix(tmp_path):
    path = write_jsonl(tmp_path / "rollouts.txt", [json.dumps({"prompt": "p", "completion": "c"})])
    (row,) = open_rows(path, format="jsonl")
    assert row.sample.completion == "c"


def test_reference_column_is_found_like_the_trl_adapter_does():
    columns = Columns()
    auto = row_from_record({"prompt": "p", "completion": "c", "answer": 12, "solution": "s"}, columns, 0)
    assert auto.sample.reference == "12" and auto.sample.fields == {"solution": "s"}
    # A column already used as the completion is never also the reference.
    taken = row_from_record({"prompt": "p", "answer": "c"}, Columns(completion="answer"), 1)
    assert taken.sample.reference is None and taken.sample.completion == "c"

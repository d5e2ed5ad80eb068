import json
import re

import pytest

from rewardlab.benchmarks.items import Item
from rewardlab.benchmarks.records import (
    read_jsonl,
    read_record_files,
    read_records,
    text_field,
    texts_field,
    unique_items,
)
from rewardlab.errors import DataFormatError

ROWS = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]


def read(path):
    return [(record.data, record.where, record.split) for record in read_records(path)]


def test_a_json_list_is_one_record_per_entry(tmp_path):
    path = tmp_path / "list.json"
    path.write_text(json.dumps(ROWS))
    assert read(path) == [(ROWS[0], f"{path}, record 0", None), (ROWS[1], f"{path}, record 1", None)]


def test_a_json_object_of_columns_is_one_record_per_row_and_scalars_are_metadata(tmp_path):
    path = tmp_path / "columns.json"
    path.write_text(json.dumps({"a": [1, 2], "b": ["x", "y"], "model": "m"}))
    assert read(path) == [(ROWS[0], f"{path}, row 0", None), (ROWS[1], f"{path}, row 1", None)]


def test_columns_of_unequal_lengths_are_refused_with_their_lengths(tmp_path):
    path = tmp_path / "columns.json"
    path.write_text(json.dumps({"a": [1, 2], "b": ["x"]}))
    message = f"{path}: expected an object of equal-length columns, got column lengths {{'a': 2, 'b': 1}}"
    with pytest.raises(DataFormatError, match=re.escape(message)):
        read_records(path)


def test_json_that_is_neither_records_nor_columns_is_refused(tmp_path):
    path = tmp_path / "data.json"
    for text, got in (("3", "int"), ('{"id": "x"}', "an object without columns")):
        path.write_text(text)
        message = f"{path}: expected a list of records or an object of columns, got {got}"
        with pytest.raises(DataFormatError, match=re.escape(message)):
            read_records(path)
    path.write_text("[{")
    with pytest.raises(DataFormatError, match=re.escape(f"{path}: not JSON (")):
        read_records(path)


def test_jsonl_is_one_record_per_line_skipping_blank_lines(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n\n" + json.dumps(ROWS[1]) + "\n")
    # Line 2 is blank: the second record is on line 3.
    assert read(path) == [(ROWS[0], f"{path}, line 1", None), (ROWS[1], f"{path}, line 3", None)]


def test_a_jsonl_line_that_is_not_json_is_named(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n{not json\n")
    with pytest.raises(DataFormatError, match=re.escape(f"{path}, line 2: not JSON (")):
        read_records(path)


def test_a_record_that_is_not_an_object_is_named(tmp_path):
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([ROWS[0], [1]]))
    with pytest.raises(DataFormatError, match=re.escape(f"{listed}, record 1: expected an object, got list")):
        read_records(listed)
    lines = tmp_path / "data.jsonl"
    lines.write_text(json.dumps(ROWS[0]) + "\n7\n")
    with pytest.raises(DataFormatError, match=re.escape(f"{lines}, line 2: expected an object, got int")):
        read_records(lines)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(
        DataFormatError, match=re.escape(f"{tmp_path / 'absent.json'}: no such file or directory")
    ):
        read_records(tmp_path / "absent.json")


def test_parquet_is_one_record_per_row(tmp_path):
    pyarrow = pytest.importorskip("pyarrow")
    parquet = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "data.parquet"
    parquet.write_table(pyarrow.Table.from_pylist(ROWS), path)
    assert read(path) == [(ROWS[0], f"{path}, row 0", None), (ROWS[1], f"{path}, row 1", None)]
    path.write_text("not parquet")
    with pytest.raises(DataFormatError, match=re.escape(f"{path}: not a Parquet file")):
        read_records(path)


def test_a_saved_dataset_is_one_record_per_row_and_a_dataset_dict_names_its_splits(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "one"))
    one = tmp_path / "one"
    assert read(one) == [(ROWS[0], f"{one}, row 0", None), (ROWS[1], f"{one}, row 1", None)]
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(ROWS[:1]), "test": datasets.Dataset.from_list(ROWS[1:])}
    ).save_to_disk(str(tmp_path / "two"))
    two = tmp_path / "two"
    assert read(two) == [
        (ROWS[0], f"{two}, split 'train', row 0", "train"),
        (ROWS[1], f"{two}, split 'test', row 0", "test"),
    ]
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFormatError, match="empty: not a dataset saved with save_to_disk"):
        read_records(tmp_path / "empty")


def test_jsonl_written_under_another_name_reads_as_jsonl(tmp_path):
    path = tmp_path / "suite.json"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    assert [record.data for record in read_jsonl(path)] == ROWS
    with pytest.raises(DataFormatError, match="No such file or directory"):
        read_jsonl(tmp_path / "absent.jsonl")


def test_a_directory_of_files_is_one_group_per_file_by_stem(tmp_path):
    (tmp_path / "b.jsonl").write_text(json.dumps(ROWS[1]) + "\n")
    (tmp_path / "a.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    (tmp_path / "notes.txt").write_text("not data")
    groups = read_record_files(tmp_path, ".jsonl", saved_datasets=True)
    assert [(stem, [record.data for record in records]) for stem, records in groups] == [
        ("a", [ROWS[0]]),
        ("b", [ROWS[1]]),
    ]
    file = read_record_files(tmp_path / "a.jsonl", ".jsonl", saved_datasets=True)
    assert [(stem, len(records)) for stem, records in file] == [("a", 1)]
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path}: no .json files in this directory")):
        read_record_files(tmp_path, ".json", saved_datasets=True)


def test_a_saved_dataset_directory_is_one_group_per_split_when_asked(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.DatasetDict(
        {"gsm8k": datasets.Dataset.from_list(ROWS[:1]), "math": datasets.Dataset.from_list(ROWS[1:])}
    ).save_to_disk(str(tmp_path / "splits"))
    groups = read_record_files(tmp_path / "splits", ".json", saved_datasets=True)
    assert [(stem, [record.data for record in records]) for stem, records in groups] == [
        ("gsm8k", [ROWS[0]]),
        ("math", [ROWS[1]]),
    ]
    # A saved Dataset is one group, named after its directory.
    datasets.Dataset.from_list(ROWS).save_to_disk(str(tmp_path / "whole"))
    assert [stem for stem, _ in read_record_files(tmp_path / "whole", ".json", saved_datasets=True)] == [
        "whole"
    ]
    # Without saved datasets, such a directory is one of files, and it holds none of the suffix.
    with pytest.raises(DataFormatError, match=r"no \.jsonl files in this directory"):
        read_record_files(tmp_path / "whole", ".jsonl", saved_datasets=False)


def test_field_checks_name_the_place_the_field_and_what_it_holds():
    with pytest.raises(DataFormatError, match=re.escape("f, line 3: field 'b': expected a string, got 7")):
        text_field({"b": 7}, "b", "f, line 3")
    with pytest.raises(
        DataFormatError, match=re.escape("f, row 0: field 'b': expected a string, got nothing (missing)")
    ):
        text_field({}, "b", "f, row 0")
    with pytest.raises(
        DataFormatError, match=re.escape("f, row 0: field 'c': expected a list of 2 strings, got ['x']")
    ):
        texts_field({"c": ["x"]}, "c", "f, row 0", count=2)
    assert texts_field({"c": ["x", "y"]}, "c", "f, row 0") == ["x", "y"]


def test_an_item_id_that_occurs_twice_is_refused(tmp_path):
    items = [Item(id=name, subset="s", prompt="p", candidates=("a",)) for name in ("x", "y", "x")]
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path}: item id 'x' occurs more than once")):
        unique_items(items, tmp_path)

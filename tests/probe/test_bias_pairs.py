"""Reading pairs for a bias probe: both shapes, the shipped preference file, and errors that name the
file, the line and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rewardlab.errors import DataFormatError
from rewardlab.probe.bias_pairs import read_pairs
from rewardlab.reward_models.preferences import read_preferences

ROOT = Path(__file__).resolve().parents[2]
DEV_PAIRS = ROOT / "examples" / "preferences_dev.jsonl"


def write(path: Path, *lines: object) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_the_shipped_preference_file_reads_as_train_rm_reads_it():
    pairs = read_pairs(DEV_PAIRS)
    preferences = read_preferences(DEV_PAIRS)
    assert [(p.prompt, p.a, p.b) for p in pairs] == [(p.prompt, p.chosen, p.rejected) for p in preferences]
    ids = [json.loads(line)["id"] for line in DEV_PAIRS.read_text().splitlines() if line.strip()]
    assert [p.id for p in pairs] == ids and all(p.labelled for p in pairs)
    assert read_pairs(DEV_PAIRS, limit=3) == pairs[:3]


def test_both_shapes_and_who_wrote_what(tmp_path):
    path = write(
        tmp_path / "pairs.jsonl",
        {
            "prompt": "q1",
            "chosen": "c",
            "rejected": "r",
            "chosen_model": "gpt4_1106_preview",
            "rejected_model": "x",
        },
        "",
        {"id": 7, "prompt": "q2", "response_a": "a", "response_b": "b", "model_a": "claude-2"},
        {
            "chosen": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            "rejected": "no",
        },
    )
    first, second, third = read_pairs(path)
    assert (first.id, first.labelled, first.model_a, first.model_b) == (
        "line-1",
        True,
        "gpt4_1106_preview",
        "x",
    )
    assert (second.id, second.labelled, second.a, second.b) == ("7", False, "a", "b")
    assert (second.model_a, second.model_b) == ("claude-2", None)
    assert third.prompt == "" and third.text("a") == "hello"  # an implicit prompt; assistant turns


def test_an_implicit_prompt_is_what_the_answers_share(tmp_path):
    user = {"role": "user", "content": "What color is the sky?"}
    path = write(
        tmp_path / "pairs.jsonl",
        # The examples of TRL's extract_prompt (trl/data_utils.py), in both formats.
        {"chosen": "The sky is blue.", "rejected": "The sky is green."},
        {
            "chosen": [user, {"role": "assistant", "content": "It is blue."}],
            "rejected": [user, {"role": "assistant", "content": "It is green."}],
        },
    )
    text, conversation = read_pairs(path)
    assert (text.prompt, text.a, text.b) == ("The sky is", " blue.", " green.")
    assert conversation.prompt == [user]
    assert conversation.a == [{"role": "assistant", "content": "It is blue."}]
    assert conversation.b == [{"role": "assistant", "content": "It is green."}]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": "q", "chosen": "c"', "line 2: not JSON"),
        ("[1, 2]", "line 2: expected an object with a pair of answers, got list"),
        ('{"prompt": "q", "chosen": "c"}', "line 2: field 'rejected': missing (columns: prompt, chosen)"),
        ('{"prompt": "q", "response_a": "a"}', "line 2: field 'response_b': missing"),
        ('{"prompt": "q", "answer": "a"}', "line 2: no answers: expected fields 'chosen' and 'rejected'"),
        (
            '{"prompt": 3, "chosen": "c", "rejected": "r"}',
            "line 2: field 'prompt': must be text or a non-empty list",
        ),
        (
            '{"prompt": "q", "chosen": [], "rejected": "r"}',
            "line 2: field 'chosen': must be text or a non-empty list",
        ),
        (
            '{"prompt": "q", "chosen": "c", "rejected": "r", "chosen_model": 4}',
            "line 2: field 'chosen_model': must be",
        ),
        (
            '{"id": true, "prompt": "q", "chosen": "c", "rejected": "r"}',
            "line 2: field 'id': must be text or an int",
        ),
        ('{"chosen": "Yes.", "rejected": "Yes. And more."}', "line 2: the two answers do not differ after"),
    ],
)
def test_a_bad_row_names_the_file_the_line_and_the_field(tmp_path, line, message):
    path = write(tmp_path / "pairs.jsonl", {"prompt": "q", "chosen": "c", "rejected": "r"}, line)
    with pytest.raises(DataFormatError) as error:
        read_pairs(path)
    assert str(error.value).startswith(f"{path}: {message}")


def test_a_missing_or_empty_file(tmp_path):
    with pytest.raises(DataFormatError, match=r"no-such\.jsonl: No such file"):
        read_pairs(tmp_path / "no-such.jsonl")
    with pytest.raises(DataFormatError, match=r"empty\.jsonl: no pairs"):
        read_pairs(write(tmp_path / "empty.jsonl", ""))

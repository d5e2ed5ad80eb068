"""PRM training: the layout it trains on is the one the ``prm`` reward reads back, and a tiny
model trained on a learnable labelling scores steps the way it was taught."""

import copy
import random

import pytest

from rewardlab import Sample, build
from rewardlab.prm.formats import PRMFormat
from rewardlab.prm.training import IGNORED, tokenize_stepwise, train_prm

ROW = {"prompt": "Q: 2+2?", "completions": ["2+2 is 4", "so 4"], "labels": [True, False]}


@pytest.mark.parametrize("bos", [None, "<eos>"], ids=["no-bos", "bos"])
def test_labels_sit_where_the_reward_reads_step_scores(tiny_tokenizer, bos):
    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.bos_token = bos
    encoded = tokenize_stepwise(ROW, tokenizer)
    layout = PRMFormat.named("token_classification").build(ROW["prompt"], ROW["completions"], tokenizer)
    assert encoded["input_ids"] == layout.input_ids
    labelled = [i for i, label in enumerate(encoded["labels"]) if label != IGNORED]
    assert labelled == layout.positions
    assert [encoded["labels"][i] for i in labelled] == [1, 0]


def test_max_length_cuts_ids_and_labels_together(tiny_tokenizer):
    encoded = tokenize_stepwise(ROW, tiny_tokenizer, max_length=9)
    assert len(encoded["input_ids"]) == len(encoded["labels"]) == 9


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({**ROW, "labels": [True]}, "one label per step"),
        ({**ROW, "labels": [0.5, 1]}, "booleans"),
        ({**ROW, "completions": []}, "'completions'"),
        ({**ROW, "prompt": ["Q"]}, "'prompt' must be text"),
    ],
)
def test_bad_rows_name_the_row_and_the_field(tiny_tokenizer, row, message):
    with pytest.raises(ValueError, match=message) as error:
        tokenize_stepwise(row, tiny_tokenizer, row_name="row 7")
    assert "row 7" in str(error.value)


def test_an_empty_separator_is_refused(tiny_tokenizer):
    with pytest.raises(ValueError, match="separator '' has no tokens"):
        tokenize_stepwise(ROW, tiny_tokenizer, separator="")


def test_rows_without_a_label_in_max_length_are_left_out(tiny_causal_lm, tiny_tokenizer, tmp_path):
    base = tmp_path / "base"
    tiny_causal_lm.save_pretrained(base)
    tiny_tokenizer.save_pretrained(base)
    with pytest.raises(ValueError, match="no row has a label within max_length=4"):
        train_prm([ROW], tmp_path / "prm", base_model=base, max_length=4, use_cpu=True)


def test_a_trained_prm_scores_steps_as_taught(tiny_causal_lm, tiny_tokenizer, tmp_path):
    base = tmp_path / "base"
    tiny_causal_lm.save_pretrained(base)
    tiny_tokenizer.save_pretrained(base)
    rng = random.Random(0)
    rows = []
    for _ in range(64):
        labels = [rng.random() < 0.5 for _ in range(3)]
        steps = [f"{rng.choice('abc')} {'ok' if good else 'no'}" for good in labels]
        rows.append({"prompt": "Q:", "completions": steps, "labels": labels})
    folder = train_prm(
        rows, tmp_path / "prm", base_model=base, epochs=6, learning_rate=3e-3, batch_size=8, use_cpu=True
    )
    config = {"type": "prm", "model": str(folder), "family": "token_classification"}
    config["steps"] = {"split": "lines"}
    reward = build(config)
    (score,) = reward.score([Sample(prompt="Q:", completion="b ok\na no\nc ok\nc no")])
    assert score.ok, score.reason
    good, bad = score.steps[0::2], score.steps[1::2]
    assert min(good) > 0.8 and max(bad) < 0.2, score.steps

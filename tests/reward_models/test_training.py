"""Reward-model training (`rewardlab.reward_models.training`) on tiny Llamas built from a config
and a generated preference set whose chosen answers end with a marker: head mode on cached
features, full and LoRA fine-tuning through TRL's real ``RewardTrainer``, resuming, what the
saved folder scores as ``reward_model``, the preference files' errors, and the length-controlled
accuracies."""

import json
import math
import sqlite3

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from rewardlab import Sample, build
from rewardlab.errors import DataFormatError, UsageError
from rewardlab.reward_models import head_fitting
from rewardlab.reward_models.head_fitting import bradley_terry_loss
from rewardlab.reward_models.pair_accuracy import pair_accuracy, similar_length
from rewardlab.reward_models.preferences import PreferencePair, read_preferences
from rewardlab.reward_models.rendering import conversation_ids
from rewardlab.reward_models.training import train_reward_model
from rewardlab.reward_models.training_pairs import tokenize_pairs
from tests.reward_models.preference_data import marker_pairs, write_jsonl
from tests.reward_models.tiny_models import save_causal_lm


@pytest.fixture
def causal_lm(tokenizer, tmp_path):
    """A tiny causal LM's folder: the starting point, as SmolLM2 would be."""
    folder = tmp_path / "lm"
    save_causal_lm(folder, tokenizer, seed=0)
    return folder


@pytest.fixture
def prefs(tmp_path):
    return write_jsonl(tmp_path / "prefs.jsonl", marker_pairs(48))


def reward_accuracy(folder, pairs):
    """The accuracy of the saved folder as the ``reward_model`` reward, built with no options
    but the folder, and each pair's reward difference."""
    reward = build({"type": "reward_model", "model": str(folder)})
    chosen = reward.score([pair.sample("chosen") for pair in pairs])
    rejected = reward.score([pair.sample("rejected") for pair in pairs])
    differences = [c.value - r.value for c, r in zip(chosen, rejected, strict=True)]
    return sum(d > 0 for d in differences) / len(pairs), differences


def head(prefs, output, causal_lm, tmp_path, **options):
    settings = {"epochs": 20, "learning_rate": 1e-2, "feature_cache": tmp_path / "features", **options}
    return train_reward_model(prefs, output, base_model=causal_lm, **settings)


def test_head_mode_training_improves_held_in_accuracy(prefs, causal_lm, tmp_path):
    reported = []
    metrics = head(prefs, tmp_path / "rm", causal_lm, tmp_path, dev=prefs, on_epoch=reported.append)
    before, after = metrics["initial"]["train"]["accuracy"], metrics["final"]["train"]["accuracy"]
    assert before <= 0.75
    assert after >= 0.9
    assert after - before >= 0.3
    assert [epoch.epoch for epoch in reported] == list(range(1, 21))
    losses = [epoch.train_loss for epoch in reported]
    assert losses[-1] < losses[0] < math.log(2) + 0.05
    assert metrics["final"]["dev"]["accuracy"] == after  # the same pairs, the same head
    assert reported[-1].dev == metrics["final"]["dev"]
    written = json.loads((tmp_path / "rm" / "metrics.json").read_text())
    assert written["epochs"] == [epoch.to_dict() for epoch in reported]
    assert written["pairs"] == {"train": 48, "train_too_long": 0, "dev": 48, "dev_too_long": 0}
    assert written["max_length"] == 64  # the tiny model's context, under the default 1024


def test_a_head_trained_folder_loads_as_reward_model_and_ranks_pairs_as_training_said(
    prefs, causal_lm, tmp_path
):
    metrics = head(prefs, tmp_path / "rm", causal_lm, tmp_path)
    accuracy, differences = reward_accuracy(tmp_path / "rm", read_preferences(prefs))
    assert accuracy == metrics["final"]["train"]["accuracy"]
    assert min(abs(d) for d in differences) > 1e-4  # no pair decided by rounding
    saved = (tmp_path / "rm" / "tokenizer_config.json").read_text() + "".join(
        path.read_text() for path in (tmp_path / "rm").glob("*.jinja")
    )
    assert "m['role']" in saved  # the chat template travels with the model


def stored_features(tmp_path):
    with sqlite3.connect(tmp_path / "features" / "features.sqlite") as connection:
        return connection.execute("SELECT count(*) FROM features").fetchone()[0]


def test_head_training_reads_features_from_the_cache_on_a_second_run(prefs, causal_lm, tmp_path, monkeypatch):
    progress = []
    first = head(
        prefs, tmp_path / "first", causal_lm, tmp_path, epochs=2, on_features=lambda *a: progress.append(a)
    )
    assert stored_features(tmp_path) == 96  # chosen and rejected of 48 pairs, each stored once
    assert progress[-1][:2] == (96, 96) and [done for done, _, _ in progress] == sorted(
        {d for d, _, _ in progress}
    )

    def no_forward(*args, **kwargs):
        raise AssertionError("features were computed again")

    monkeypatch.setattr(head_fitting, "pooled_outputs", no_forward)
    second = head(prefs, tmp_path / "second", causal_lm, tmp_path, epochs=2)
    assert second["final"] == first["final"]


def test_a_stopped_feature_pass_keeps_what_it_computed(prefs, causal_lm, tmp_path):
    class Stop(Exception):
        pass

    def stop_after_two_batches(done, total, tokens):
        if done >= 32:
            raise Stop

    with pytest.raises(Stop):
        head(
            prefs,
            tmp_path / "first",
            causal_lm,
            tmp_path,
            epochs=1,
            inference_batch_size=16,
            on_features=stop_after_two_batches,
        )
    assert stored_features(tmp_path) == 32
    progress = []
    finished = head(
        prefs, tmp_path / "second", causal_lm, tmp_path, epochs=20, on_features=lambda *a: progress.append(a)
    )
    assert progress[-1][:2] == (64, 64)  # only the sequences the first run had not reached
    whole = head(prefs, tmp_path / "third", causal_lm, tmp_path / "fresh", epochs=20)
    assert finished["final"] == whole["final"]  # stored features are the features


def test_head_training_computes_new_features_for_another_model(prefs, causal_lm, tokenizer, tmp_path):
    head(prefs, tmp_path / "first", causal_lm, tmp_path, epochs=1)
    other = tmp_path / "other-lm"
    save_causal_lm(other, tokenizer, seed=1)
    progress = []
    head(prefs, tmp_path / "second", other, tmp_path, epochs=1, on_features=lambda *a: progress.append(a))
    assert stored_features(tmp_path) == 192 and progress[-1][:2] == (96, 96)


def test_feature_progress_lines(capsys, monkeypatch):
    from rewardlab.cli.train_rm import FeatureProgress

    clock = iter([100.0, 110.0, 111.0, 130.0, 200.0])
    monkeypatch.setattr("rewardlab.cli.train_rm.time.monotonic", lambda: next(clock))
    progress = FeatureProgress(every_s=10)
    # 10 sequences in 10 s after the first batch: 20 left take 20 s; the call 1 s later is not shown.
    for done, tokens in [(10, 1000), (20, 3000), (25, 3500), (40, 6000)]:
        progress(done, 40, tokens)
    progress(5, 5, 100)  # the next split's pass starts its own count
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "features: 10/40 sequences",
        "features: 20/40 sequences, 200 tokens/s, about 20 s left",
        "features: 40/40 sequences, 167 tokens/s",
        "features: 5/5 sequences",
    ]


def test_full_mode_trains_through_reward_trainer_and_saves_a_loadable_checkpoint(causal_lm, tmp_path):
    rows = write_jsonl(tmp_path / "margins.jsonl", marker_pairs(16, margin=0.5))
    reported = []
    metrics = train_reward_model(
        rows, tmp_path / "rm", dev=rows, base_model=causal_lm, mode="full", epochs=1, batch_size=8,
        learning_rate=1e-3, center_rewards_coefficient=0.01, on_epoch=reported.append,
    )  # fmt: skip
    assert (tmp_path / "rm" / "checkpoint-2" / "trainer_state.json").is_file()
    assert [epoch.epoch for epoch in reported] == [1]
    assert reported[0].train_accuracy is not None
    assert metrics["epochs"] == [reported[0].to_dict()]
    accuracy, _ = reward_accuracy(tmp_path / "rm", read_preferences(rows))
    assert accuracy == metrics["final"]["dev"]["accuracy"]
    assert metrics["initial"]["dev"]["pairs"] == 16


def test_resume_continues_training_from_the_last_checkpoint(causal_lm, prefs, tmp_path):
    options = {"base_model": causal_lm, "mode": "full", "batch_size": 16, "learning_rate": 1e-3}
    train_reward_model(prefs, tmp_path / "rm", dev=prefs, epochs=1, **options)
    assert sorted(path.name for path in (tmp_path / "rm").glob("checkpoint-*")) == ["checkpoint-3"]
    with pytest.raises(UsageError, match="not empty"):
        train_reward_model(prefs, tmp_path / "rm", epochs=2, **options)
    metrics = train_reward_model(prefs, tmp_path / "rm", dev=prefs, epochs=2, resume=True, **options)
    assert metrics["resumed_from"] == str(tmp_path / "rm" / "checkpoint-3")
    assert [epoch["epoch"] for epoch in metrics["epochs"]] == [1, 2]  # epoch 1 from the checkpoint
    assert all(epoch["dev"] is not None for epoch in metrics["epochs"])
    state = json.loads((tmp_path / "rm" / "checkpoint-6" / "trainer_state.json").read_text())
    assert state["global_step"] == 6


def test_lora_training_merges_the_adapters_into_a_plain_checkpoint(causal_lm, prefs, tmp_path):
    metrics = train_reward_model(
        prefs, tmp_path / "rm", dev=prefs, base_model=causal_lm, mode="lora", epochs=1, batch_size=16,
        learning_rate=1e-3, lora_r=4, lora_alpha=8,
    )  # fmt: skip
    assert not (tmp_path / "rm" / "adapter_config.json").exists()
    accuracy, _ = reward_accuracy(tmp_path / "rm", read_preferences(prefs))
    assert accuracy == metrics["final"]["dev"]["accuracy"]


def test_head_training_from_the_embedded_causal_lm(model_available, tmp_path):
    rows = write_jsonl(tmp_path / "prefs.jsonl", marker_pairs(4))
    metrics = train_reward_model(
        rows, tmp_path / "rm", epochs=2, max_length=64, feature_cache=tmp_path / "features"
    )
    accuracy, _ = reward_accuracy(tmp_path / "rm", read_preferences(rows))
    assert accuracy == metrics["final"]["train"]["accuracy"]
    config = json.loads((tmp_path / "rm" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForSequenceClassification"]
    assert len(config["id2label"]) == 1


def test_pairs_are_tokenized_as_the_reward_model_reads_them(tokenizer):
    user = [{"role": "user", "content": "2+2?"}]
    four, five = {"role": "assistant", "content": "4"}, {"role": "assistant", "content": "5"}
    pairs = [
        PreferencePair("2+2?", "4", "5"),
        PreferencePair(user, [four], [five]),
        PreferencePair("", [*user, four], [*user, five]),
    ]
    tokenized = tokenize_pairs(pairs, tokenizer, limit=64)
    expected = conversation_ids(
        Sample(prompt="2+2?", completion="4"), tokenizer, chat_template=True, append_eos=True
    )
    assert tokenized.chosen == [expected] * 3
    assert tokenizer.decode(expected) == "user: 2+2?\nassistant: 4\n"
    assert tokenize_pairs(pairs, tokenizer, limit=len(expected) - 1).too_long == 3


def test_a_pair_the_tokenizer_cannot_render_names_its_row_and_field(tokenizer, tmp_path):
    tokenizer.chat_template = None
    rows = [{"prompt": "a", "chosen": "b", "rejected": "c"}, {"prompt": "a", "chosen": "b",
            "rejected": [{"role": "assistant", "content": "c"}]}]  # fmt: skip
    pairs = read_preferences(write_jsonl(tmp_path / "p.jsonl", rows))
    with pytest.raises(DataFormatError, match=r"p\.jsonl: line 2: field 'rejected': chat messages need"):
        tokenize_pairs(pairs, tokenizer, limit=64)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"prompt": "a", "chosen": "b"}', r"line 3: field 'rejected': missing \(columns: prompt, chosen\)"),
        (
            '{"prompt": "a", "chosen": 3, "rejected": "c"}',
            r"line 3: field 'chosen': must be text or .* got int",
        ),
        ('{"prompt": "a", "chosen": [], "rejected": "c"}', r"line 3: field 'chosen': .* got an empty list"),
        ('{"prompt": "a", "chosen": [{"content": "b"}], "rejected": "c"}', r"line 3: field 'chosen'"),
        ('{"prompt": 7, "chosen": "b", "rejected": "c"}', r"line 3: field 'prompt'"),
        ('{"chosen": "b", "rejected": "c", "margin": "big"}', r"line 3: field 'margin': must be a finite"),
        ('{"chosen": "b", "rejected": "c", "margin": 1}', r"line 1: field 'margin': missing, while other"),
        ('{"chosen": "b", "rejected": "c"', r"line 3: not JSON"),
        ("[1, 2]", r"line 3: expected an object with chosen and rejected, got list"),
    ],
)
def test_a_bad_preference_row_names_the_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "prefs.jsonl"
    path.write_text('{"prompt": "a", "chosen": "b", "rejected": "c"}\n\n' + line + "\n")
    with pytest.raises(DataFormatError, match=f"prefs.jsonl: {message}"):
        read_preferences(path)


def test_preferences_read_from_parquet_and_saved_datasets(tmp_path):
    rows = marker_pairs(3, margin=1.5)
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "prefs.parquet")
    datasets.Dataset.from_list(rows).save_to_disk(str(tmp_path / "saved"))
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "dict"))
    expected = [(row["prompt"], row["chosen"], row["rejected"], 1.5) for row in rows]
    for source in ("prefs.parquet", "saved", "dict"):
        pairs = read_preferences(tmp_path / source)
        assert [(p.prompt, p.chosen, p.rejected, p.margin) for p in pairs] == expected
    bad = [*rows[:2], {**rows[2], "chosen": None}]
    pq.write_table(pa.Table.from_pylist(bad), tmp_path / "bad.parquet")
    with pytest.raises(DataFormatError, match=r"bad\.parquet: row 2: field 'chosen': missing"):
        read_preferences(tmp_path / "bad.parquet")


def test_the_margin_column_can_be_renamed_or_ignored(tmp_path):
    rows = [{**row, "strength": 0.75, "margin": "not a number"} for row in marker_pairs(2)]
    path = write_jsonl(tmp_path / "prefs.jsonl", rows)
    assert [pair.margin for pair in read_preferences(path, margin_column="strength")] == [0.75, 0.75]
    assert [pair.margin for pair in read_preferences(path, margin_column=None)] == [None, None]
    with pytest.raises(DataFormatError, match="line 1: field 'margin': must be a finite number"):
        read_preferences(path)


def test_preference_files_that_cannot_be_read_at_all(tmp_path):
    with pytest.raises(DataFormatError, match="no such file"):
        read_preferences(tmp_path / "missing.jsonl")
    (tmp_path / "prefs.csv").write_text("prompt,chosen,rejected\n")
    with pytest.raises(DataFormatError, match=r"prefs\.csv: not a preference file"):
        read_preferences(tmp_path / "prefs.csv")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataFormatError, match="no preference pairs"):
        read_preferences(tmp_path / "empty.jsonl")
    rows = datasets.Dataset.from_list(marker_pairs(2))
    datasets.DatasetDict({"train": rows, "test": rows}).save_to_disk(str(tmp_path / "two"))
    with pytest.raises(DataFormatError, match="splits train, test; give one split's folder"):
        read_preferences(tmp_path / "two")


def test_length_controlled_accuracy_on_a_hand_made_set():
    # (chosen, rejected) lengths, and whether the chosen answer's reward is greater:
    #   (100, 95)  similar (5 < 10% of 100)        right
    #   (50, 80)   chosen shorter                  right
    #   (40, 200)  chosen shorter                  wrong
    #   (90, 100)  chosen shorter; not similar     wrong  (10 is not under 10% of 100)
    #   (91, 100)  chosen shorter, and similar     right
    #   (0, 0)     similar (equal)                 wrong  (a tie)
    chosen = [1.0, 2.0, 0.0, 0.0, 3.0, 1.0]
    rejected = [0.0, 1.0, 1.0, 1.0, 2.0, 1.0]
    accuracy = pair_accuracy(chosen, rejected, [100, 50, 40, 90, 91, 0], [95, 80, 200, 100, 100, 0])
    assert accuracy.to_dict() == {
        "accuracy": 3 / 6,
        "pairs": 6,
        "similar_length": {"accuracy": 2 / 3, "pairs": 3},
        "chosen_shorter": {"accuracy": 2 / 4, "pairs": 4},
    }
    assert similar_length(95, 100) and not similar_length(90, 100) and similar_length(0, 0)
    assert pair_accuracy([], [], [], []).to_dict()["similar_length"] == {"accuracy": None, "pairs": 0}


def test_metrics_json_holds_the_length_controlled_figures_of_the_trained_model(prefs, causal_lm, tmp_path):
    # chosen (with the marker) vs rejected lengths: 12 vs 12 and 13 vs 12 are similar; 7 vs 23
    # and 12 vs 16 have the chosen answer shorter; 22 vs 3 is neither.
    dev_rows = [
        {"prompt": "a", "chosen": "dog fish !!!", "rejected": "cat sun tree"},
        {"prompt": "b", "chosen": "moon rock !!!", "rejected": "sun cat blue"},
        {"prompt": "c", "chosen": "cat !!!", "rejected": "dog fish tree moon rock"},
        {"prompt": "d", "chosen": "tree sun !!!", "rejected": "blue rock fish d"},
        {"prompt": "e", "chosen": "fish moon blue cat !!!", "rejected": "dog"},
    ]
    dev = write_jsonl(tmp_path / "dev.jsonl", dev_rows)
    head(prefs, tmp_path / "rm", causal_lm, tmp_path, dev=dev)
    pairs = read_preferences(dev)
    _, differences = reward_accuracy(tmp_path / "rm", pairs)
    wins = [d > 0 for d in differences]
    figures = json.loads((tmp_path / "rm" / "metrics.json").read_text())["final"]["dev"]
    assert figures["pairs"] == 5 and figures["accuracy"] == sum(wins) / 5
    assert figures["similar_length"] == {"accuracy": (wins[0] + wins[1]) / 2, "pairs": 2}
    assert figures["chosen_shorter"] == {"accuracy": (wins[2] + wins[3]) / 2, "pairs": 2}


def test_the_loss_is_trls_bradley_terry_loss_with_margin_and_centering():
    chosen, rejected = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 3.0])
    plain = -(torch.nn.functional.logsigmoid(torch.tensor([1.0, -1.0]))).mean()
    assert bradley_terry_loss(chosen, rejected, None, None).item() == pytest.approx(plain.item())
    with_margin = -(torch.nn.functional.logsigmoid(torch.tensor([0.5, -1.5]))).mean()
    margins = torch.tensor([0.5, 0.5])
    assert bradley_terry_loss(chosen, rejected, margins, None).item() == pytest.approx(with_margin.item())
    centred = plain + 0.01 * torch.tensor([1.0**2, 5.0**2]).mean()
    assert bradley_terry_loss(chosen, rejected, None, 0.01).item() == pytest.approx(centred.item())


def test_training_refuses_options_that_cannot_work(prefs, causal_lm, tmp_path):
    with pytest.raises(ValueError, match="head mode keeps no checkpoints"):
        train_reward_model(prefs, tmp_path / "rm", base_model=causal_lm, resume=True)
    with pytest.raises(UsageError, match="no checkpoint-"):
        train_reward_model(prefs, tmp_path / "rm", base_model=causal_lm, mode="full", resume=True)
    with pytest.raises(UsageError, match="no training pair fits in 5 tokens"):
        train_reward_model(prefs, tmp_path / "short", base_model=causal_lm, max_length=5)

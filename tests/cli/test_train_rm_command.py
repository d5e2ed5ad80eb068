"""``rewardlab train-rm`` in process through `main`: a tiny causal LM from a config trained on a
generated preference file (head mode, and full mode through TRL's RewardTrainer with a resume),
and the mistakes that exit with status 2 and one line naming the problem."""

import json

import pytest

from rewardlab import Sample, Status, build
from rewardlab.cli import main
from tests.reward_models.preference_data import marker_pairs, write_jsonl
from tests.reward_models.tiny_models import save_causal_lm


@pytest.fixture
def causal_lm(tokenizer, tmp_path):
    folder = tmp_path / "lm"
    save_causal_lm(folder, tokenizer, seed=0)
    return folder


@pytest.fixture
def tokenizer(tiny_tokenizer):
    return tiny_tokenizer


@pytest.fixture
def prefs(tmp_path):
    return write_jsonl(tmp_path / "prefs.jsonl", marker_pairs(48))


def run(*argv):
    return main(["train-rm", *map(str, argv)])


def test_train_rm_head_mode_reports_each_epoch_and_saves_a_reward_model(prefs, causal_lm, tmp_path, capsys):
    output = tmp_path / "rm"
    status = run(
        prefs, "--output", output, "--dev", prefs, "--model", causal_lm, "--epochs", 20,
        "--learning-rate", 0.01, "--feature-cache", tmp_path / "features",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines[:20]] == [f"epoch {n}" for n in range(1, 21)]
    assert "train loss" in lines[0] and "dev accuracy" in lines[0] and "similar length" in lines[0]
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["final"]["dev"]["accuracy"] >= 0.9
    assert any(line.startswith("dev accuracy: ") and " -> " in line for line in lines)
    assert lines[-1] == f"rewardlab train-rm: model in {output} (metrics in {output / 'metrics.json'})"
    reward = build({"type": "reward_model", "model": str(output)})
    (score,) = reward.score([Sample(prompt="q1?", completion="cat dog !!!")])
    assert score.status is Status.OK


def test_train_rm_full_mode_resumes_from_its_last_checkpoint(prefs, causal_lm, tmp_path, capsys):
    common = ("--model", causal_lm, "--mode", "full", "--batch-size", 16, "--learning-rate", 0.001)
    assert run(prefs, "--output", tmp_path / "rm", "--epochs", 1, *common) == 0
    capsys.readouterr()
    assert run(prefs, "--output", tmp_path / "rm", "--epochs", 2, "--resume", *common) == 0
    out = capsys.readouterr().out
    assert out.startswith("epoch 2: train loss ")
    metrics = json.loads((tmp_path / "rm" / "metrics.json").read_text())
    assert metrics["resumed_from"].endswith("checkpoint-3")
    assert [epoch["epoch"] for epoch in metrics["epochs"]] == [1, 2]


def test_a_bad_preference_file_exits_2_naming_the_row_and_field(causal_lm, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"prompt": "a", "chosen": "b", "rejected": "c"}\n{"prompt": "a", "chosen": 1, "rejected": "c"}\n'
    )
    assert run(bad, "--output", tmp_path / "rm", "--model", causal_lm) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"rewardlab train-rm: error: {bad}: line 2: field 'chosen': must be text")
    assert error.count("\n") == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--resume"], "resume: head mode keeps no checkpoints"),
        (["--model", "no-such-model"], "model no-such-model: no such folder or file"),
        (["--learning-rate", "0"], "--learning-rate: Input should be greater than 0"),
    ],
)
def test_options_that_cannot_work_exit_2(prefs, causal_lm, capsys, extra, message):
    argv = [prefs, "--output", prefs.parent / "rm", "--model", causal_lm, *extra]
    assert run(*argv) == 2
    assert capsys.readouterr().err.startswith(f"rewardlab train-rm: error: {message}")


def test_a_non_empty_output_folder_exits_2_without_overwrite(prefs, causal_lm, tmp_path, capsys):
    (tmp_path / "rm").mkdir()
    (tmp_path / "rm" / "notes.txt").write_text("mine")
    assert run(prefs, "--output", tmp_path / "rm", "--model", causal_lm) == 2
    assert "not empty; pass overwrite (--overwrite) or resume (--resume)" in capsys.readouterr().err

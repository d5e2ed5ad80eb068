"""The learned-reward-model loop at tiny scale, every step real: ``rewardlab train-rm --mode head``
on generated preference pairs, its output folder as a one-file ``reward_model`` config, a real
GRPOTrainer run on that config through `as_reward_func`, and the same config served by a
``rewardlab serve`` process and asked through OpenRLHF's ``POST /get_reward``.

The expected rewards do not come from rewardlab: they are the saved classifier's logit, read
with transformers, for the conversation rendered by the chat template and tokenized without
special tokens (the input TRL's ``RewardTrainer`` gives conversational pairs), one sequence at a
time so that no padding is involved."""

import json
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rewardlab import Sample, build
from rewardlab.cli import main
from rewardlab.integrations.trl import as_reward_func
from tests.recording import Recorded, two_step_grpo_config
from tests.reward_models.preference_data import marker_pairs, write_jsonl
from tests.reward_models.tiny_models import llama_config, save_causal_lm
from tests.serving.conftest import post, wait_ready

#: Close enough for one model's float32 logits computed in batches of different shapes.
CLOSE = {"rel": 1e-4, "abs": 1e-5}
PROMPTS = ["q1?", "q2?"]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_tokenizer):
    """``(config, metrics, dev)``: the reward config naming the folder that train-rm wrote, its
    metrics.json, and the dev pairs."""
    folder = tmp_path_factory.mktemp("loop")
    save_causal_lm(folder / "lm", tiny_tokenizer, seed=0)
    train = write_jsonl(folder / "train.jsonl", marker_pairs(48, seed=0))
    dev_rows = marker_pairs(24, seed=1)
    dev = write_jsonl(folder / "dev.jsonl", dev_rows)
    status = main(
        ["train-rm", str(train), "--dev", str(dev), "--output", str(folder / "rm"), "--model",
         str(folder / "lm"), "--mode", "head", "--epochs", "20", "--feature-cache", str(folder / "features")]
    )  # fmt: skip
    assert status == 0
    config = folder / "reward.yaml"
    config.write_text(f"type: reward_model\nmodel: {folder / 'rm'}\n")
    metrics = json.loads((folder / "rm" / "metrics.json").read_text())
    return config, metrics, dev_rows


@pytest.fixture(scope="module")
def expected(trained):
    """``expected(prompt, completion)``: the saved model's logit, by transformers alone."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    config, _, _ = trained
    folder = config.parent / "rm"
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)

    def logit(prompt, completion):
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]
        text = tokenizer.apply_chat_template(messages, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")
        with torch.no_grad():
            return model(**ids).logits[0, 0].item()

    return logit


@pytest.fixture(scope="module")
def grpo_run(trained, tiny_tokenizer, tmp_path_factory):
    """``(trainer, batches)``: two GRPO steps of a tiny policy on the config's reward, and the
    samples and scores of each reward call."""
    trl = pytest.importorskip("trl")
    from datasets import Dataset
    from transformers import LlamaForCausalLM

    config, _, _ = trained
    reward = Recorded(build(config))
    torch.manual_seed(0)
    policy = LlamaForCausalLM(
        llama_config(
            tiny_tokenizer, max_position_embeddings=256, eos_token_id=tiny_tokenizer.eos_token_id,
            bos_token_id=tiny_tokenizer.eos_token_id,
        )
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=policy,
        processing_class=tiny_tokenizer,
        reward_funcs=[as_reward_func(reward)],
        args=two_step_grpo_config(tmp_path_factory.mktemp("grpo")),
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
    )
    trainer.train()
    return trainer, reward.batches


def test_train_rm_folder_scores_dev_pairs_through_the_config_as_training_measured(trained, expected):
    config, metrics, dev_rows = trained
    reward = build(config)
    chosen = reward.score([Sample(prompt=r["prompt"], completion=r["chosen"]) for r in dev_rows])
    rejected = reward.score([Sample(prompt=r["prompt"], completion=r["rejected"]) for r in dev_rows])
    won = [c.value > r.value for c, r in zip(chosen, rejected, strict=True)]
    assert metrics["final"]["dev"]["pairs"] == len(dev_rows) == 24
    assert sum(won) / len(won) == metrics["final"]["dev"]["accuracy"]
    # The marker is learnable: training moved the dev accuracy well above the untrained head's.
    assert metrics["final"]["dev"]["accuracy"] >= 0.9 > metrics["initial"]["dev"]["accuracy"]
    row = dev_rows[0]
    assert chosen[0].value == pytest.approx(expected(row["prompt"], row["chosen"]), **CLOSE)


def test_grpo_logs_the_reward_models_own_scores_of_its_completions(grpo_run, expected):
    trainer, batches = grpo_run
    logged = [entry["rewards/reward_model/mean"] for entry in trainer.state.log_history if "reward" in entry]
    assert len(logged) == len(batches) == 2
    for mean, (samples, scores) in zip(logged, batches, strict=True):
        assert len(samples) == 4 and {s.prompt for s in samples} <= set(PROMPTS)
        values = [expected(s.prompt, s.completion) for s in samples]
        assert [s.value for s in scores] == pytest.approx(values, **CLOSE)
        assert mean == pytest.approx(sum(values) / len(values), **CLOSE)


def test_grpo_completions_served_from_the_config_get_the_same_rewards_over_get_reward(
    trained, grpo_run, expected
):
    config, _, _ = trained
    _, batches = grpo_run
    samples = [sample for batch, _ in batches for sample in batch]
    command = [sys.executable, "-m", "rewardlab.cli", "serve", "--config", str(config), "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 120
        line = ""
        while " at http" not in line and time.monotonic() < deadline and process.poll() is None:
            if select.select([process.stdout], [], [], 1.0)[0]:
                line = process.stdout.readline()
        assert "serving 'reward_model' at http://127.0.0.1:" in line, line
        url = line.split(" at ")[1].split()[0]
        wait_ready(url)
        # What OpenRLHF's remote_rm_fn posts (openrlhf/utils/remote_rm_utils.py): each prompt
        # followed by its response, the prompts, the labels.
        body = {
            "query": [s.prompt + s.completion for s in samples],
            "prompts": [s.prompt for s in samples],
            "labels": [None] * len(samples),
        }
        status, _, answer = post(url, "/get_reward", body)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert status == 200, answer
    assert answer["statuses"] == ["ok"] * len(samples) == ["ok"] * 8
    assert answer["extra_logs"]["reward_model/failed"] == [0.0] * 8
    values = [expected(s.prompt, s.completion) for s in samples]
    assert answer["rewards"] == pytest.approx(values, **CLOSE)
    in_process = [score.value for _, scores in batches for score in scores]
    assert answer["rewards"] == pytest.approx(in_process, **CLOSE)


def test_the_example_pairs_load_as_preference_pairs_with_dev_held_out():
    """The example's default preference files: pairs the reward-model trainer reads, dev apart,
    each row naming the line of HH-RLHF it came from."""
    from rewardlab.reward_models.preferences import read_preferences

    rows = {}
    for split in ("train", "dev"):
        path = EXAMPLES / f"preferences_{split}.jsonl"
        assert len(read_preferences(path)) == {"train": 48, "dev": 24}[split]
        rows[split] = [json.loads(line) for line in path.read_text().splitlines()]
    assert not {r["id"] for r in rows["train"]} & {r["id"] for r in rows["dev"]}
    assert all(r["source"].startswith("anthropics/hh-rlhf@") for r in rows["train"] + rows["dev"])


def test_the_baseline_comparison_measures_every_row_on_train_rms_dev_pairs(
    trained, tmp_path, monkeypatch, capsys
):
    """``examples/compare_rm_baselines.py`` on the trained folder, with a rule reward standing in
    for the judge (the embedded judge is the default; any config can take its place)."""
    config, metrics, dev_rows = trained
    judge = tmp_path / "judge.yaml"
    judge.write_text("type: length\nmode: below_max\nmax_length: 10\nunit: chars\n")
    out = tmp_path / "baselines.json"
    dev = write_jsonl(tmp_path / "dev.jsonl", dev_rows)
    arguments = [str(dev), "--rm", str(config.parent / "rm"), "--judge-config", str(judge), "--out", str(out)]
    monkeypatch.setattr(sys, "argv", ["compare_rm_baselines.py", *arguments])
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import compare_rm_baselines

    compare_rm_baselines.main()
    rows = json.loads(out.read_text())["rows"]
    trained_row = rows["trained model, through reward_model"]
    # Scored again through the reward, the trained model agrees with train-rm's own record.
    assert trained_row["accuracy"] == metrics["final"]["dev"]["accuracy"]
    assert trained_row["unscored_answers"] == 0
    chosen = [len(row["chosen"]) for row in dev_rows]
    rejected = [len(row["rejected"]) for row in dev_rows]
    longer = rows["longer answer wins"]
    assert longer["accuracy"] == sum(c > r for c, r in zip(chosen, rejected, strict=True)) / len(dev_rows)
    assert longer["chosen_shorter"]["accuracy"] == 0.0
    assert f"{len(dev_rows)} dev pairs within" in capsys.readouterr().out

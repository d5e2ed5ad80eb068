"""A row's ``completion_ids`` are the ids of the honest text only: the probe gives every text it
scores the ids of that text (with the policy's tokenizer), or drops them and says when the reward
then cannot score - never a variant counted at the honest length."""

from __future__ import annotations

import json

import pytest

from rewardlab import Reward, Sample, Score, Status, build
from rewardlab.cli import main
from rewardlab.probe import probe_reward
from rewardlab.probe.registry import exploits_named


class Words:
    """A tokenizer with one id per whitespace-separated word (the id is the word's length)."""

    def encode(self, text: str) -> list[int]:
        return [len(word) for word in text.split()]


class IdsOfItsText(Reward):
    """The number of token ids, when they are the ids of the completion's own text; a sample whose
    ids belong to another text is refused, so a stale id list cannot pass unseen."""

    name = "ids_of_its_text"

    async def ascore(self, samples):
        scores = []
        for sample in samples:
            ids = sample.fields.get("completion_ids")
            if ids is None or ids != Words().encode(sample.completion_text):
                scores.append(
                    Score.failure(Status.INVALID_INPUT, f"{sample.label()}: fields.completion_ids stale")
                )
            else:
                scores.append(Score(float(len(ids))))
        return scores


ROWS = [
    ("What is 6*7?", "Six sevens make forty-two, so the answer is $\\boxed{42}$.", "42"),
    ("What is 2+3?", "Two and three are five: $\\boxed{5}$.", "5"),
    ("What is 10/2?", "Ten halved is five, so $\\boxed{5}$ is the answer.", "5"),
]


def _samples() -> list[Sample]:
    return [
        Sample(
            prompt=prompt,
            completion=completion,
            reference=answer,
            id=f"row-{index}",
            fields={"completion_ids": Words().encode(completion)},
        )
        for index, (prompt, completion, answer) in enumerate(ROWS)
    ]


def test_every_variant_gets_the_ids_of_its_own_text():
    result = probe_reward(
        IdsOfItsText(), _samples(), exploits=exploits_named(["fluff_padding", "truncated"]), tokenizer=Words()
    )
    padding, truncated = result.exploits
    # Kept, the honest ids would make every variant "stale"; each variant is scored on its own ids:
    # padding adds words (a win on each row), cutting removes them (a loss on each).
    assert (padding.scored, padding.wins, padding.failed) == (3, 3, {})
    assert (truncated.scored, truncated.losses, truncated.failed) == (3, 3, {})
    assert result.token_ids == "re-made" and result.unmeasured is None


def test_without_a_tokenizer_the_ids_are_dropped_and_a_reward_with_its_own_counts_the_text():
    words = build(
        {
            "type": "length",
            "mode": "linear_target",
            "target_length": 2000,
            "unit": "tokens",
            "tokenizer": Words(),
        }
    )
    stale = [
        Sample(prompt=s.prompt, completion=s.completion, fields={"completion_ids": [1]}) for s in _samples()
    ]
    (padding,) = probe_reward(words, stale, exploits=exploits_named(["fluff_padding"])).exploits
    # The stale one-id lists would make every sample (and every variant) one token long: ties.
    assert (padding.scored, padding.wins) == (3, 3)
    result = probe_reward(IdsOfItsText(), _samples(), exploits=exploits_named(["fluff_padding"]))
    assert result.token_ids == "dropped" and result.probed == 0 and result.ids_needed == 3
    assert result.unmeasured is not None and "give --tokenizer" in result.unmeasured


@pytest.fixture
def word_tokenizer(tmp_path):
    """A real transformers tokenizer saved in a local folder: one id per whitespace-separated word."""
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    words = sorted({word for _, completion, _ in ROWS for word in completion.split()})
    vocab = {"[UNK]": 0, **{word: index + 1 for index, word in enumerate(words)}}
    model = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    model.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    folder = tmp_path / "tokenizer"
    transformers.PreTrainedTokenizerFast(tokenizer_object=model, unk_token="[UNK]").save_pretrained(folder)
    return folder, lambda text: [vocab.get(word, 0) for word in text.split()]


def test_the_command_probes_a_token_length_reward_only_with_the_policy_tokenizer(
    word_tokenizer, tmp_path, capsys
):
    folder, encode = word_tokenizer
    data = tmp_path / "rollouts.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {"id": f"row-{i}", "prompt": p, "completion": c, "answer": a, "completion_ids": encode(c)}
            )
            + "\n"
            for i, (p, c, a) in enumerate(ROWS)
        )
    )
    # Correctness, plus a term that pays up to 2,000 tokens: padding a right answer pays.
    config = tmp_path / "tokens.yaml"
    config.write_text(
        "type: combine\ncomponents:\n  accuracy: {type: math_answer}\n"
        "  detail: {type: length, mode: linear_target, target_length: 2000, unit: tokens, weight: 0.5}\n"
    )

    def probe(out, *extra):
        argv = ["probe", "--config", str(config), "--data", str(data), "--output", str(tmp_path / out)]
        return main([*argv, "--exploits", "fluff_padding,truncated", "--no-progress", *extra])

    # Without a tokenizer the variants' ids are unknown and the reward cannot count them: exit 3.
    assert probe("none") == 3
    printed = capsys.readouterr()
    assert "could not score: the reward cannot score 3 row(s) without fields.completion_ids" in printed.out
    assert "NOTHING MEASURED: no row was probed" in printed.out
    report = json.loads((tmp_path / "none" / "probe.json").read_text())
    assert (report["probed"], report["token_ids"], report["not_probed"]["invalid_input"]["rows"]) == (
        0,
        "dropped",
        3,
    )

    assert probe("tokenizer", "--tokenizer", str(folder)) == 1
    report = json.loads((tmp_path / "tokenizer" / "probe.json").read_text())
    padding, truncated = report["exploits"]
    assert (padding["wins"], padding["scored"], truncated["losses"]) == (3, 3, 3)
    assert report["failing"] == ["fluff_padding"] and report["token_ids"] == "re-made"

    assert probe("missing", "--tokenizer", str(tmp_path / "nowhere")) == 2
    assert "--tokenizer" in capsys.readouterr().err

"""`reward_model` on tiny sequence-classification Llamas saved to a folder. Expected values come
from running the model directly on the text written out by hand (the test tokenizer's chat
template renders ``role: content`` lines), one sequence at a time, without padding."""

import json
import math
import pickle

import pytest
import torch

from rewardlab import ConfigError, Sample, Status, as_reward_func, build
from rewardlab.reward_models import SequenceClassifierReward
from rewardlab.reward_models.shaping import Calibration, OutputShaping
from tests.reward_models.tiny_models import llama_config, save_classifier

PROMPT, COMPLETION = "2+2?", "4, since 2+2=4."
RENDERED = f"user: {PROMPT}\nassistant: {COMPLETION}\n"


def logits(model, tokenizer, text, *, special_tokens=False):
    """The model's outputs for ``text``, one unpadded sequence."""
    ids = tokenizer(text, add_special_tokens=special_tokens)["input_ids"]
    return logits_of_ids(model, ids)


def logits_of_ids(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].tolist()


@pytest.fixture
def rm(tokenizer, tmp_path):
    folder = tmp_path / "rm"
    return str(folder), save_classifier(folder, tokenizer, seed=1)


def test_the_value_is_the_score_head_on_the_last_token_of_the_rendered_conversation(rm, tokenizer):
    folder, model = rm
    ids = tokenizer(RENDERED, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        hidden = model.model(torch.tensor([ids])).last_hidden_state[0, -1]
        expected = (model.score.weight @ hidden).item()
    (score,) = build({"type": "reward_model", "model": folder}).score(
        [Sample(prompt=PROMPT, completion=COMPLETION)]
    )
    assert score.status is Status.OK
    assert score.value == pytest.approx(expected, abs=1e-5)
    assert score.details == {"raw": score.value, "tokens": len(ids), "truncated": False}
    assert score.breakdown == {}


def test_both_trl_formats_render_the_same_conversation(rm, tokenizer):
    folder, model = rm
    reward = build({"type": "reward_model", "model": folder})
    user = [{"role": "user", "content": PROMPT}]
    assistant = [{"role": "assistant", "content": COMPLETION}]
    samples = [
        Sample(prompt=PROMPT, completion=COMPLETION),
        Sample(prompt=user, completion=assistant),
        Sample(prompt=user, completion=COMPLETION),
        Sample(prompt=PROMPT, completion=assistant),
    ]
    expected = logits(model, tokenizer, RENDERED)[0]
    assert [s.value for s in reward.score(samples)] == pytest.approx([expected] * 4, abs=1e-5)
    system = [{"role": "system", "content": "Be brief."}, *user]
    (with_system,) = reward.score([Sample(prompt=system, completion=assistant)])
    assert with_system.value == pytest.approx(
        logits(model, tokenizer, f"system: Be brief.\n{RENDERED}")[0], abs=1e-5
    )


def test_without_a_chat_template_the_text_is_prompt_plus_completion_and_eos(tokenizer, tmp_path):
    tokenizer.chat_template = None
    model = save_classifier(tmp_path / "plain", tokenizer, seed=2)
    reward = build({"type": "reward_model", "model": str(tmp_path / "plain")})
    scores = reward.score([
        Sample(prompt=PROMPT, completion=COMPLETION),
        Sample(prompt=PROMPT, completion=COMPLETION + "<eos>"),
        Sample(prompt=[{"role": "user", "content": PROMPT}], completion=COMPLETION),
    ])  # fmt: skip
    expected = logits(model, tokenizer, PROMPT + COMPLETION + "<eos>", special_tokens=True)[0]
    assert [s.value for s in scores[:2]] == pytest.approx([expected] * 2, abs=1e-5)
    assert scores[2].status is Status.INVALID_INPUT
    assert "chat template" in scores[2].reason
    bare = build({"type": "reward_model", "model": str(tmp_path / "plain"), "append_eos": False})
    (score,) = bare.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert score.value == pytest.approx(logits(model, tokenizer, PROMPT + COMPLETION)[0], abs=1e-5)


def test_render_text_ignores_the_template_and_chat_template_needs_one(rm, tokenizer, tmp_path):
    folder, model = rm
    (score,) = build({"type": "reward_model", "model": folder, "render": "text"}).score(
        [Sample(prompt=PROMPT, completion=COMPLETION)]
    )
    assert score.value == pytest.approx(logits(model, tokenizer, PROMPT + COMPLETION + "<eos>")[0], abs=1e-5)
    tokenizer.chat_template = None
    save_classifier(tmp_path / "plain", tokenizer)
    reward = build({"type": "reward_model", "model": str(tmp_path / "plain"), "render": "chat_template"})
    with pytest.raises(ValueError, match="no chat template"):
        reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])


def test_named_heads_are_in_the_breakdown_and_weights_make_the_value(tokenizer, tmp_path):
    folder = str(tmp_path / "multi")
    model = save_classifier(folder, tokenizer, num_labels=3, seed=3)
    outputs = logits(model, tokenizer, RENDERED)
    reward = build({
        "type": "reward_model", "model": folder,
        "heads": {"helpful": 0, "honest": 1, "safe": 2}, "weights": {"helpful": 0.5, "safe": -2.0},
    })  # fmt: skip
    (score,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert score.breakdown == pytest.approx(
        {"helpful": outputs[0], "honest": outputs[1], "safe": outputs[2]}, abs=1e-5
    )
    assert score.value == pytest.approx(0.5 * outputs[0] - 2.0 * outputs[2], abs=1e-5)
    one = build({"type": "reward_model", "model": folder, "heads": {"honest": 1}})
    (score,) = one.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert score.value == pytest.approx(outputs[1], abs=1e-5)
    assert score.breakdown == pytest.approx({"honest": outputs[1]}, abs=1e-5)


def test_a_model_with_several_outputs_needs_heads_that_exist(tokenizer, tmp_path):
    folder = str(tmp_path / "multi")
    save_classifier(folder, tokenizer, num_labels=3)
    sample = Sample(prompt=PROMPT, completion=COMPLETION)
    with pytest.raises(ValueError, match="3 outputs; name the ones to read"):
        build({"type": "reward_model", "model": folder}).score([sample])
    with pytest.raises(ValueError, match=r"heads \['far'\] point past its 3 outputs"):
        build({"type": "reward_model", "model": folder, "heads": {"far": 3}}).score([sample])


@pytest.mark.parametrize("truncation", ["refuse", "left", "right"])
def test_an_input_past_max_length_is_refused_or_cut_and_says_so(rm, tokenizer, truncation):
    folder, model = rm
    ids = tokenizer(RENDERED, add_special_tokens=False)["input_ids"]
    limit = len(ids) - 5
    reward = build({"type": "reward_model", "model": folder, "max_length": limit, "truncation": truncation})
    short = Sample(prompt="?", completion="!")
    long_score, short_score = reward.score([Sample(prompt=PROMPT, completion=COMPLETION), short])
    assert short_score.status is Status.OK and short_score.details["truncated"] is False
    if truncation == "refuse":
        assert long_score.status is Status.INVALID_INPUT and long_score.value is None
        assert f"{len(ids)} tokens, more than the {limit} the model reads" in long_score.reason
        assert long_score.details == {"tokens": len(ids), "max_length": limit}
        return
    kept = ids[-limit:] if truncation == "left" else ids[:limit]
    assert long_score.value == pytest.approx(logits_of_ids(model, kept)[0], abs=1e-5)
    assert long_score.details == {
        "raw": long_score.value, "tokens": limit, "truncated": True, "truncation": truncation,
        "total_tokens": len(ids),
    }  # fmt: skip
    assert long_score.reason == f"truncated ({truncation}): read {limit} of {len(ids)} tokens"


def test_the_model_context_length_is_the_default_limit(rm):
    folder, _ = rm
    (score,) = build({"type": "reward_model", "model": folder}).score(
        [Sample(prompt="x" * 70, completion="y")]
    )
    assert score.status is Status.INVALID_INPUT and "the 64 the model reads" in score.reason


def test_batches_of_mixed_lengths_give_the_values_of_one_at_a_time(rm, tokenizer):
    folder, model = rm
    completions = ["a", "bb", "a longer answer", "4", "four, written out in full words", "x" * 20, "no"]
    samples = [Sample(prompt=PROMPT, completion=c) for c in completions] + [
        Sample(prompt="Hi", completion="Hey")
    ]
    expected = [
        logits(model, tokenizer, f"user: {s.prompt}\nassistant: {s.completion}\n")[0] for s in samples
    ]
    padded = build({"type": "reward_model", "model": folder, "max_batch_tokens": 400, "max_padding": 0.9})
    small = build({"type": "reward_model", "model": folder, "max_batch_tokens": 60, "max_padding": 0.5})
    alone = build({"type": "reward_model", "model": folder, "max_batch_tokens": 1})
    for reward in (padded, small, alone):
        assert [s.value for s in reward.score(samples)] == pytest.approx(expected, abs=1e-5)


def test_a_model_without_a_pad_token_in_its_config_gets_the_tokenizers(tokenizer, tmp_path):
    from transformers import LlamaForSequenceClassification

    torch.manual_seed(4)
    model = LlamaForSequenceClassification(llama_config(tokenizer, num_labels=1, pad_token_id=None)).eval()
    model.save_pretrained(tmp_path / "nopad")
    tokenizer.save_pretrained(tmp_path / "nopad")
    samples = [Sample(prompt=PROMPT, completion=c) for c in ("a", "a much longer one")]
    reward = build({"type": "reward_model", "model": str(tmp_path / "nopad"), "max_padding": 0.9})
    expected = [logits(model, tokenizer, f"user: {PROMPT}\nassistant: {s.completion}\n")[0] for s in samples]
    assert [s.value for s in reward.score(samples)] == pytest.approx(expected, abs=1e-5)


def test_shaping_sigmoid_normalized_and_clip(rm, tokenizer, tmp_path):
    folder, model = rm
    raw = logits(model, tokenizer, RENDERED)[0]
    sample = Sample(prompt=PROMPT, completion=COMPLETION)
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps({"mean": raw - 1.5, "std": 0.5}))
    cases = [
        ({"shaping": "sigmoid"}, 1 / (1 + math.exp(-raw))),
        ({"shaping": "normalized", "calibration": str(calibration)}, 3.0),
        ({"shaping": "normalized", "calibration": str(calibration), "clip": [-1, 2]}, 2.0),
        ({"clip": [raw + 1, raw + 2]}, raw + 1),
    ]
    for options, expected in cases:
        (score,) = build({"type": "reward_model", "model": folder, **options}).score([sample])
        assert score.value == pytest.approx(expected, abs=1e-5), options
        assert score.details["raw"] == pytest.approx(raw, abs=1e-5)


def test_output_shaping_on_exact_numbers():
    assert OutputShaping()(-3.25) == -3.25
    assert OutputShaping("sigmoid")(0.0) == 0.5
    assert OutputShaping("sigmoid")(2.0) == pytest.approx(0.8807970779778823, abs=1e-15)
    assert OutputShaping("sigmoid")(-1000.0) == 0.0  # no overflow
    assert OutputShaping("normalized", Calibration(mean=1.0, std=2.0))(5.0) == 2.0
    assert OutputShaping("raw", clip=(-1.0, 1.0))(3.0) == 1.0
    assert OutputShaping("sigmoid", clip=(0.2, 0.4))(0.0) == 0.4


@pytest.mark.parametrize(
    ("options", "path", "message"),
    [
        ({"truncation": "middle"}, "truncation", "Input should be 'refuse', 'left' or 'right'"),
        ({"shaping": "tanh"}, "shaping", "Input should be 'raw', 'sigmoid', 'normalized', 'group' or"),
        ({"shaping": "normalized"}, "calibration", "shaping: normalized needs a file"),
        ({"calibration": "c.json"}, "calibration", "is read only with shaping: normalized"),
        ({"heads": {"a": 0, "b": 1}}, "weights", "several heads need weights"),
        ({"heads": {"a": 0}, "weights": {"b": 1}}, "weights", "no head named ['b']"),
        ({"weights": {"a": 1}}, "weights", "weights combine named heads"),
        ({"heads": {"a": -1}}, "heads.a", "Input should be greater than or equal to 0"),
        ({"clip": [1, 0]}, "clip", "should be [lo, hi] with lo < hi"),
        ({"dtype": "int8"}, "dtype", "Input should be 'float32', 'bfloat16' or 'float16'"),
        ({"max_batch_tokens": 0}, "max_batch_tokens", "Input should be greater than or equal to 1"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(options, path, message):
    with pytest.raises(ConfigError) as error:
        build({"type": "combine", "components": {"rm": {"type": "reward_model", "model": "/rm", **options}}})
    assert str(error.value).startswith(f"components.rm.{path}: ")
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{", "is not JSON"),
        ('{"mean": 0, "std": 0}', "'std' should be greater than 0"),
        ('{"mean": "x", "std": 1}', "'mean' should be a finite number"),
    ],
)
def test_a_bad_calibration_file_is_a_config_error(tmp_path, content, message):
    path = tmp_path / "calibration.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=f"^calibration: .*{message}"):
        build({"type": "reward_model", "model": "/rm", "shaping": "normalized", "calibration": str(path)})


def test_malformed_samples_fail_alone_with_a_status(rm):
    folder, _ = rm
    reward = build({"type": "reward_model", "model": folder})
    scores = reward.score([
        Sample(prompt=PROMPT, completion=5),
        Sample(prompt=PROMPT, completion=[{"role": "assistant", "content": 5}]),
        Sample(prompt=3, completion="x"),
        Sample(prompt=PROMPT, completion=COMPLETION),
    ])  # fmt: skip
    assert [s.status for s in scores] == [Status.INVALID_INPUT] * 3 + [Status.OK]
    assert scores[2].reason.startswith("sample #2: prompt:")


def test_a_model_with_its_own_code_runs_only_when_trusted(tokenizer, tmp_path):
    """ArmoRM-style: the folder's own class returns its objectives as ``rewards`` and a gated
    score as ``logits``; loaded from the folder, never from the hub."""
    folder = tmp_path / "custom"
    model = save_classifier(folder, tokenizer, num_labels=3, seed=5)
    (folder / "modeling_tiny_rm.py").write_text(
        "from dataclasses import dataclass\n\n"
        "import torch\n"
        "from transformers import LlamaForSequenceClassification\n"
        "from transformers.utils import ModelOutput\n\n\n"
        "@dataclass\n"
        "class GatedOutput(ModelOutput):\n"
        "    logits: torch.FloatTensor | None = None\n"
        "    rewards: torch.FloatTensor | None = None\n\n\n"
        "class TinyGatedRewardModel(LlamaForSequenceClassification):\n"
        "    def forward(self, input_ids=None, attention_mask=None, **kwargs):\n"
        "        rewards = super().forward(input_ids=input_ids, attention_mask=attention_mask).logits\n"
        "        gate = torch.softmax(rewards, dim=-1)\n"
        "        return GatedOutput(logits=(gate * rewards).sum(-1, keepdim=True), rewards=rewards)\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForSequenceClassification": "modeling_tiny_rm.TinyGatedRewardModel"}
    (folder / "config.json").write_text(json.dumps(config))
    sample = Sample(prompt=PROMPT, completion=COMPLETION)
    with pytest.raises(ValueError, match="set trust_remote_code: true"):
        build({"type": "reward_model", "model": str(folder), "heads": {"a": 0}}).score([sample])
    rewards = torch.tensor(logits(model, tokenizer, RENDERED))
    gated = (torch.softmax(rewards, dim=-1) * rewards).sum().item()
    (score,) = build({"type": "reward_model", "model": str(folder), "trust_remote_code": True}).score(
        [sample]
    )
    assert score.value == pytest.approx(gated, abs=1e-5)
    objectives = build({
        "type": "reward_model", "model": str(folder), "trust_remote_code": True, "output_field": "rewards",
        "heads": {"a": 0, "c": 2}, "weights": {"a": 1.0, "c": 1.0},
    })  # fmt: skip
    (score,) = objectives.score([sample])
    unnamed = {
        "type": "reward_model",
        "model": str(folder),
        "trust_remote_code": True,
        "output_field": "rewards",
    }
    with pytest.raises(ValueError, match="3 outputs; name the ones to read"):
        build(unnamed).score([sample])
    assert score.breakdown == pytest.approx({"a": rewards[0].item(), "c": rewards[2].item()}, abs=1e-5)
    assert score.value == pytest.approx(rewards[0].item() + rewards[2].item(), abs=1e-5)


def test_through_the_trl_adapter(rm, tokenizer):
    folder, model = rm
    reward_func = as_reward_func(build({"type": "reward_model", "model": folder}))
    assert reward_func.__name__ == "reward_model"
    conversational = reward_func(
        prompts=[[{"role": "user", "content": PROMPT}]] * 2,
        completions=[[{"role": "assistant", "content": COMPLETION}], [{"role": "assistant", "content": "5"}]],
    )
    standard = reward_func(prompts=[PROMPT, PROMPT], completions=[COMPLETION, "5"])
    expected = [
        logits(model, tokenizer, RENDERED)[0],
        logits(model, tokenizer, f"user: {PROMPT}\nassistant: 5\n")[0],
    ]
    assert conversational == pytest.approx(expected, abs=1e-5)
    assert standard == pytest.approx(expected, abs=1e-5)


def test_pickles_and_scores_the_same_after(rm):
    folder, _ = rm
    reward = SequenceClassifierReward(model=folder, shaping="sigmoid")
    sample = Sample(prompt=PROMPT, completion=COMPLETION)
    before = reward.score([sample])[0]
    after = pickle.loads(pickle.dumps(reward)).score([sample])[0]
    assert (after.status, after.value) == (before.status, before.value)

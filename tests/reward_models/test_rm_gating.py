"""`reward_model` on an ArmoRM-style model: RLHFlow/ArmoRM-Llama3-8B-v0.1's
``modeling_custom.py`` (``LlamaForRewardModelWithGating``) at toy size, written into the
model's folder as its own code. Its forward pass returns the objectives (``rewards``, read at the
last token), the gating network's weights over them (``gating_output``, read at the last
``assistant: `` of the conversation, as ArmoRM reads its gate at the last assistant header) and
the gated score (``score``, and ``logits`` again): the weights times the objectives after the
``reward_transform_matrix``. Expected values are computed here from the model's layers run by
hand on one unpadded conversation."""

import importlib.util
import json

import pytest
import torch

from rewardlab import Sample, Status, build
from tests.reward_models.tiny_models import llama_config

OBJECTIVES = 5
MODELING = """
from dataclasses import dataclass

import torch
from torch import nn
from transformers import LlamaModel, LlamaPreTrainedModel
from transformers.utils import ModelOutput


class GatingNetwork(nn.Module):
    def __init__(self, in_features, out_features, temperature, hidden_dim, n_hidden):
        super().__init__()
        self.temperature = temperature
        self.logit_scale = nn.Parameter(torch.ones(1))
        layers = []
        for _ in range(n_hidden):
            layers.append(nn.Linear(in_features, hidden_dim))
            in_features = hidden_dim
        layers.append(nn.Linear(in_features, out_features))
        self.layers = nn.ModuleList(layers)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = torch.relu(layer(x)) if i < len(self.layers) - 1 else layer(x)
        return torch.softmax(x / self.temperature, dim=1) * self.logit_scale[0]


def find_token_for_gating(ids, pattern):
    for j in range(len(ids) - len(pattern), -1, -1):
        if ids[j : j + len(pattern)] == pattern:
            return j
    raise ValueError("Token pattern not found in the list.")


@dataclass
class CustomOutput(ModelOutput):
    rewards: torch.FloatTensor = None
    hidden_state: torch.FloatTensor | None = None
    prompt_embedding: torch.FloatTensor | None = None
    gating_output: torch.FloatTensor | None = None
    score: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None


class TinyRewardModelWithGating(LlamaPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.regression_layer = nn.Linear(config.hidden_size, config.num_objectives, bias=False)
        self.post_init()
        self.reward_transform_matrix = nn.Parameter(torch.eye(config.num_objectives), requires_grad=False)
        self.gating = GatingNetwork(
            config.hidden_size, config.num_objectives, config.gating_temperature,
            config.gating_hidden_dim, config.gating_n_hidden,
        )

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        hidden = self.model(input_ids, attention_mask=attention_mask).last_hidden_state
        rows = torch.arange(input_ids.shape[0], device=hidden.device)
        last = (torch.eq(input_ids, self.config.pad_token_id).int().argmax(-1) - 1) % input_ids.shape[-1]
        rewards = self.regression_layer(hidden[rows, last])
        gate_at = [find_token_for_gating(ids.tolist(), self.config.gating_token_pattern) for ids in input_ids]
        prompt_embedding = hidden[rows, gate_at, :]
        gating_output = self.gating(prompt_embedding)
        score = torch.sum(gating_output * (rewards @ self.reward_transform_matrix), dim=1)
        return CustomOutput(
            rewards=rewards, hidden_state=hidden[rows, last], prompt_embedding=prompt_embedding,
            gating_output=gating_output, score=score, logits=score,
        )
"""


@pytest.fixture
def armorm(tokenizer, tmp_path):
    """The stand-in, with a transform matrix that is not the identity, saved as a checkpoint
    whose config maps it to ``AutoModelForSequenceClassification``; the folder and the model."""
    folder = tmp_path / "armorm_tiny"
    folder.mkdir()
    (folder / "modeling_tiny_armorm.py").write_text(MODELING)
    spec = importlib.util.spec_from_file_location("tiny_armorm_here", folder / "modeling_tiny_armorm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    pattern = tokenizer("assistant: ", add_special_tokens=False)["input_ids"]
    config = llama_config(
        tokenizer, num_objectives=OBJECTIVES, gating_temperature=0.5, gating_hidden_dim=16, gating_n_hidden=2,
        gating_token_pattern=pattern,
    )  # fmt: skip
    torch.manual_seed(11)
    model = module.TinyRewardModelWithGating(config).eval()
    with torch.no_grad():
        model.reward_transform_matrix.copy_(torch.eye(OBJECTIVES) + 0.3 * torch.randn(OBJECTIVES, OBJECTIVES))
        model.gating.logit_scale.fill_(1.7)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    saved = json.loads((folder / "config.json").read_text())
    saved["auto_map"] = {
        "AutoModelForSequenceClassification": "modeling_tiny_armorm.TinyRewardModelWithGating"
    }
    (folder / "config.json").write_text(json.dumps(saved))
    return str(folder), model


def by_hand(model, tokenizer, text):
    """The objectives, the gating weights and the gated score of ``text``, one unpadded row."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    pattern = tokenizer("assistant: ", add_special_tokens=False)["input_ids"]
    gate_at = max(j for j in range(len(ids)) if ids[j : j + len(pattern)] == pattern)
    with torch.no_grad():
        hidden = model.model(torch.tensor([ids])).last_hidden_state[0]
        rewards = model.regression_layer.weight @ hidden[-1]
        gating = model.gating(hidden[gate_at][None])[0]
        transformed = rewards @ model.reward_transform_matrix
        score = sum(gating[k].item() * transformed[k].item() for k in range(OBJECTIVES))
    return rewards.tolist(), gating.tolist(), score


CONVERSATIONS = [("2+2?", "4"), ("2+2?", "Four, since two and two are four."), ("Hi", "Hello there!")]
SAMPLES = [Sample(prompt=prompt, completion=completion) for prompt, completion in CONVERSATIONS]


def expected(model, tokenizer):
    return [by_hand(model, tokenizer, f"user: {p}\nassistant: {c}\n") for p, c in CONVERSATIONS]


@pytest.mark.parametrize("output_field", ["score", "logits"])
def test_the_gated_score_is_the_value_and_the_gating_weights_are_in_the_details(
    armorm, tokenizer, output_field
):
    folder, model = armorm
    reward = build({
        "type": "reward_model", "model": folder, "trust_remote_code": True, "output_field": output_field,
        "max_batch_tokens": 400, "max_padding": 0.9,
    })  # fmt: skip
    scores = reward.score(SAMPLES)
    assert [score.status for score in scores] == [Status.OK] * 3
    for score, (_, gating, gated) in zip(scores, expected(model, tokenizer), strict=True):
        assert score.value == pytest.approx(gated, abs=1e-5)
        assert score.details["gating"] == pytest.approx(gating, abs=1e-6)
        assert len(score.details["gating"]) == OBJECTIVES
        assert score.breakdown == {}


def test_the_objectives_as_heads_combine_by_weights_before_the_transform(armorm, tokenizer):
    folder, model = armorm
    reward = build({
        "type": "reward_model", "model": folder, "trust_remote_code": True, "output_field": "rewards",
        "heads": {"helpful": 0, "honest": 2, "safe": 4}, "weights": {"helpful": 1.0, "safe": -0.5},
        "max_batch_tokens": 400, "max_padding": 0.9,
    })  # fmt: skip
    scores = reward.score(SAMPLES)
    for score, (rewards, gating, _) in zip(scores, expected(model, tokenizer), strict=True):
        assert score.breakdown == pytest.approx(
            {"helpful": rewards[0], "honest": rewards[2], "safe": rewards[4]}, abs=1e-5
        )
        assert score.value == pytest.approx(rewards[0] - 0.5 * rewards[4], abs=1e-5)
        assert score.details["raw"] == pytest.approx(score.value, abs=1e-12)
        assert score.details["gating"] == pytest.approx(gating, abs=1e-6)


def test_several_objectives_without_heads_are_refused(armorm):
    folder, _ = armorm
    reward = build(
        {"type": "reward_model", "model": folder, "trust_remote_code": True, "output_field": "rewards"}
    )
    with pytest.raises(ValueError, match=f"{OBJECTIVES} outputs; name the ones to read with heads"):
        reward.score(SAMPLES[:1])


def test_an_output_the_model_does_not_return_is_named(armorm):
    folder, _ = armorm
    reward = build(
        {"type": "reward_model", "model": folder, "trust_remote_code": True, "output_field": "reward"}
    )
    with pytest.raises(ValueError, match="its output has no 'reward'"):
        reward.score(SAMPLES[:1])

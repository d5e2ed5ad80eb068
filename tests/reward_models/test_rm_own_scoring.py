"""`reward_model` with ``score_method``: a model that scores conversations through a method of
its own, as InternLM2-Reward does (internlm/internlm2-7b-reward, ``modeling_internlm2.py``,
``InternLM2ForRewardModel``, loaded with ``AutoModel``). The stand-in below is that class at toy
size, written into the model's folder as its own code: a value head read at a reward token
appended after the chat-template rendering, and ``get_scores(tokenizer, conversations)``.
Expected values come from running its backbone and head by hand on the ids written out here,
one conversation at a time, without padding."""

import importlib.util
import json
import pickle

import pytest
import torch

from rewardlab import ConfigError, Sample, Status, build
from rewardlab.reward_models import SequenceClassifierReward
from rewardlab.reward_models.sequence_classifier import _method_scores
from tests.reward_models.tiny_models import llama_config

REWARD_TOKEN = "[UNUSED_TOKEN_130]"
MODELING = """
import torch
from torch import nn
from transformers import LlamaModel, LlamaPreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutputWithPast


class TinyInternLM2ForRewardModel(LlamaPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.model = LlamaModel(config)
        self.v_head = nn.Linear(config.hidden_size, 1, bias=False)
        self.reward_token_id = config.reward_token_id
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, **kwargs):
        assert input_ids[:, -1].eq(self.reward_token_id).all().item(), (
            "The last token of input_ids must be the reward token"
        )
        hidden = self.model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids
        ).last_hidden_state
        return SequenceClassifierOutputWithPast(logits=self.v_head(hidden)[:, -1].view(-1, 1))

    @torch.no_grad()
    def get_scores(self, tokenizer, conversations, **kwargs):
        texts = [
            tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=False)
            for c in conversations
        ]
        encoded = tokenizer(texts, return_tensors="pt", padding=True)  # left padding
        rows = encoded["input_ids"].shape[0]
        ids = torch.cat([encoded["input_ids"], torch.full((rows, 1), self.reward_token_id)], dim=1)
        mask = encoded["attention_mask"]
        mask = torch.cat([mask, torch.ones(rows, 1, dtype=mask.dtype)], dim=1)
        # InternLM2 leaves positions to the model; counted from the mask here, a left-padded row
        # scores as it does alone.
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        out = self.forward(
            input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
        )
        return out[0].squeeze().cpu().tolist()

    @torch.no_grad()
    def get_score(self, tokenizer, conversation, **kwargs):
        return self.get_scores(tokenizer, [conversation])

    @torch.no_grad()
    def compare(self, tokenizer, conversation1, conversation2, **kwargs):
        return self.get_score(tokenizer, conversation1) > self.get_score(tokenizer, conversation2)
"""


@pytest.fixture
def internlm(tokenizer, tmp_path):
    """The stand-in saved as a checkpoint whose config maps it to ``AutoModel`` only; the
    folder, the model in memory and the reward token's id."""
    tokenizer.add_tokens([REWARD_TOKEN], special_tokens=True)
    tokenizer.padding_side = "left"
    reward_token_id = tokenizer.convert_tokens_to_ids(REWARD_TOKEN)
    folder = tmp_path / "internlm_reward"
    folder.mkdir()
    (folder / "modeling_tiny_internlm2.py").write_text(MODELING)
    spec = importlib.util.spec_from_file_location(
        "tiny_internlm2_here", folder / "modeling_tiny_internlm2.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(7)
    model = module.TinyInternLM2ForRewardModel(
        llama_config(tokenizer, reward_token_id=reward_token_id)
    ).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModel": "modeling_tiny_internlm2.TinyInternLM2ForRewardModel"}
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder), model, reward_token_id


def by_hand(model, tokenizer, text, reward_token_id):
    """The value head at the reward token appended to ``text``'s tokens, one unpadded row."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [reward_token_id]
    with torch.no_grad():
        hidden = model.model(torch.tensor([ids])).last_hidden_state[0, -1]
        return (model.v_head.weight @ hidden).item()


def rendered(prompt, completion):
    return f"user: {prompt}\nassistant: {completion}\n"


def trusted(folder, **options):
    return build({
        "type": "reward_model", "model": folder, "trust_remote_code": True, "score_method": "get_scores",
        **options,
    })  # fmt: skip


SAMPLES = [
    Sample(prompt="2+2?", completion="4"),
    Sample(prompt="2+2?", completion="Four, as two and two make four."),
    Sample(
        prompt=[{"role": "user", "content": "Hi"}], completion=[{"role": "assistant", "content": "Hello!"}]
    ),
    Sample(prompt="Name a colour.", completion="Blue."),
]


def expected_values(model, tokenizer, reward_token_id):
    texts = [
        rendered("2+2?", "4"),
        rendered("2+2?", "Four, as two and two make four."),
        rendered("Hi", "Hello!"),
        rendered("Name a colour.", "Blue."),
    ]
    return [by_hand(model, tokenizer, text, reward_token_id) for text in texts]


def test_the_models_own_method_scores_each_conversation(internlm, tokenizer):
    folder, model, reward_token_id = internlm
    expected = expected_values(model, tokenizer, reward_token_id)
    batched = trusted(folder, max_batch_tokens=400, max_padding=0.9)  # one call, left-padded rows
    alone = trusted(folder, max_batch_tokens=1)  # one conversation a call: a bare number comes back
    for reward in (batched, alone):
        scores = reward.score(SAMPLES)
        assert [score.status for score in scores] == [Status.OK] * 4
        assert [score.value for score in scores] == pytest.approx(expected, abs=1e-5)
    tokens = len(tokenizer(rendered("2+2?", "4"), add_special_tokens=False)["input_ids"])
    assert scores[0].details == {"raw": scores[0].value, "tokens": tokens, "truncated": False}


def test_a_system_prompt_reaches_the_method_as_a_message(internlm, tokenizer):
    folder, model, reward_token_id = internlm
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    (score,) = trusted(folder).score([Sample(prompt=prompt, completion="4")])
    text = "system: Be brief.\n" + rendered("2+2?", "4")
    assert score.value == pytest.approx(by_hand(model, tokenizer, text, reward_token_id), abs=1e-5)


def test_without_trust_remote_code_the_model_is_refused(internlm):
    folder, _, _ = internlm
    with pytest.raises(
        ConfigError, match=r"^score_method: calls the model's own code: set trust_remote_code"
    ):
        build({"type": "reward_model", "model": folder, "score_method": "get_scores"})
    with pytest.raises(ValueError, match="set trust_remote_code: true"):
        build({"type": "reward_model", "model": folder}).score(SAMPLES[:1])


def test_read_as_a_classifier_its_forward_pass_fails_every_sample_with_the_reason(internlm):
    """Loaded through AutoModel (its config maps no classifier), the forward pass asserts the
    reward token it does not get: each sample fails with that reason, none is scored 0."""
    folder, _, _ = internlm
    scores = build({"type": "reward_model", "model": folder, "trust_remote_code": True}).score(SAMPLES[:2])
    assert [score.status for score in scores] == [Status.ERROR] * 2
    assert all("must be the reward token" in score.reason for score in scores)


def test_a_method_that_fails_fails_its_batch_with_the_error(internlm):
    folder, _, _ = internlm
    scores = trusted(folder, score_method="compare").score(SAMPLES[:2])
    assert [score.status for score in scores] == [Status.ERROR] * 2
    assert scores[1].reason.startswith("sample #1: the reward model failed: TypeError:")


def test_a_method_the_model_lacks_is_refused(internlm):
    folder, _, _ = internlm
    with pytest.raises(ValueError, match="its class TinyInternLM2ForRewardModel has no method 'score_all'"):
        trusted(folder, score_method="score_all").score(SAMPLES[:1])


def test_an_over_long_conversation_is_refused_and_the_rest_scored(internlm, tokenizer):
    folder, model, reward_token_id = internlm
    long = Sample(prompt="2+2?", completion="x" * 40)
    tokens = len(tokenizer(rendered("2+2?", "x" * 40), add_special_tokens=False)["input_ids"])
    refused, scored, malformed = trusted(folder, max_length=30).score(
        [long, SAMPLES[0], Sample(prompt="2+2?", completion=5)]
    )
    assert refused.status is Status.INVALID_INPUT and refused.value is None
    assert f"{tokens} tokens, more than the 30 the model reads" in refused.reason
    assert refused.details == {"tokens": tokens, "max_length": 30}
    assert scored.value == pytest.approx(
        by_hand(model, tokenizer, rendered("2+2?", "4"), reward_token_id), abs=1e-5
    )
    assert malformed.status is Status.INVALID_INPUT and malformed.reason.startswith("sample #2: completion")


def test_shaping_applies_to_what_the_method_returned(internlm, tokenizer):
    folder, model, reward_token_id = internlm
    raw = by_hand(model, tokenizer, rendered("2+2?", "4"), reward_token_id)
    (score,) = trusted(folder, shaping="sigmoid").score(SAMPLES[:1])
    assert score.value == pytest.approx(1 / (1 + torch.exp(torch.tensor(-raw)).item()), abs=1e-6)
    assert score.details["raw"] == pytest.approx(raw, abs=1e-5)


def test_pickles_and_scores_the_same_after(internlm):
    folder, _, _ = internlm
    reward = SequenceClassifierReward(model=folder, trust_remote_code=True, score_method="get_scores")
    before = reward.score(SAMPLES[:2])
    after = pickle.loads(pickle.dumps(reward)).score(SAMPLES[:2])
    assert [score.value for score in after] == [score.value for score in before]


@pytest.mark.parametrize(
    ("options", "path", "message"),
    [
        ({}, "score_method", "set trust_remote_code: true"),
        ({"trust_remote_code": True, "heads": {"a": 0}}, "heads", "is not read with score_method"),
        (
            {"trust_remote_code": True, "output_field": "score"},
            "output_field",
            "is not read with score_method",
        ),
        ({"trust_remote_code": True, "render": "text"}, "render", "is not read with score_method"),
        ({"trust_remote_code": True, "append_eos": False}, "append_eos", "is not read with score_method"),
        (
            {"trust_remote_code": True, "truncation": "left"},
            "truncation",
            "should be refuse with score_method",
        ),
    ],
)
def test_options_a_scoring_method_cannot_honour_are_config_errors(options, path, message):
    with pytest.raises(ConfigError) as error:
        build({"type": "reward_model", "model": "/rm", "score_method": "get_scores", **options})
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)


def test_a_method_name_must_be_a_public_name():
    with pytest.raises(ConfigError, match=r"^score_method: String should match pattern"):
        build(
            {"type": "reward_model", "model": "/rm", "trust_remote_code": True, "score_method": "__class__"}
        )


@pytest.mark.parametrize(
    ("returned", "size", "expected"),
    [
        ([0.5, -2.0], 2, [0.5, -2.0]),  # InternLM2's model card: a flat list
        ([[0.5], [-2.0]], 2, [0.5, -2.0]),  # one-element rows, unsqueezed
        (torch.tensor([[0.5], [-2.0]]), 2, [0.5, -2.0]),
        (0.5, 1, [0.5]),  # a squeezed batch of one
        (torch.tensor(0.5), 1, [0.5]),
    ],
)
def test_what_a_scoring_method_may_return(returned, size, expected):
    assert _method_scores("m", "get_scores", returned, size) == expected


@pytest.mark.parametrize(
    ("returned", "size"), [([0.5], 2), (0.5, 2), ([[0.5, 1.0]], 1), ([True], 1), ("0.5", 1)]
)
def test_anything_else_a_method_returns_is_an_error(returned, size):
    with pytest.raises(
        ValueError, match=f"get_scores returned .* for {size} conversations, not one score each"
    ):
        _method_scores("m", "get_scores", returned, size)

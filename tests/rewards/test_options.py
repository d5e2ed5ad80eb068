"""Typed options: every registered reward type has one options model, with a description per
field, whose JSON Schema is valid; a bad value is refused alike from Python and from a config,
naming the config path and the field; and the defaults the model declares are those the reward
runs with."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import typing
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import BaseModel

import rewardlab
from rewardlab import ConfigError, Sample, build, register
from rewardlab.llm.backends import BACKENDS, BackendConfig, RetryConfig, client_options, make_backend
from rewardlab.llm.client import ClientOptions
from rewardlab.rewards.code.reward import SandboxLimitsOptions
from rewardlab.rewards.code.sandbox import SandboxLimits
from rewardlab.rewards.contract import Reward, Score
from rewardlab.rewards.options import (
    RewardOptions,
    config_schema,
    declared_model,
    options_model,
    options_schema,
    signature_options,
    takes_options,
)
from rewardlab.rewards.registry import BUILTIN_REWARDS, reward_class
from rewardlab.testing import Reply, ScriptedPoolingServer

ROOT = Path(__file__).resolve().parents[2]

#: The options each type needs to be valid at all.
MINIMAL = {
    "code_execution": {},
    "combine": {"components": {"a": {"type": "repetition_penalty"}}},
    "dpo_implicit": {"policy": "embedded", "reference": "embedded"},
    "ensemble": {"members": {"a": {"type": "repetition_penalty"}, "b": {"type": "string_match"}}},
    "fallback": {"rewards": [{"type": "string_match"}, {"type": "repetition_penalty"}]},
    "implicit_prm": {"policy": "embedded"},
    "instruction_following": {},
    "json_schema": {},
    "length": {"mode": "below_max", "max_length": 5},
    "length_controlled": {"reward": {"type": "repetition_penalty"}},
    "final_answer": {"reward": {"type": "string_match"}},
    "per_turn": {"reward": {"type": "string_match"}},
    "environment_state": {},
    "listwise_judge": {},
    "math_answer": {},
    "monte_carlo_steps": {"verifier": {"type": "math_answer"}},
    "pairwise_judge": {},
    "pointwise_judge": {},
    "prm": {"model": "/a/prm", "family": "qwen_prm"},
    "progress_advantage": {"policy": "embedded"},
    "reference_scaffolded_judge": {},
    "regex_match": {"pattern": "x"},
    "remote": {"url": "http://127.0.0.1:9"},
    "repetition_penalty": {},
    "reward_model": {"model": "/a/reward-model"},
    "route": {"routes": {"a": {"type": "repetition_penalty"}}},
    "rubric": {},
    "self_proposed_rubric": {},
    "served_reward_model": {"url": "http://127.0.0.1:9"},
    "soft_overlong": {"max_length": 10, "cache_length": 2},
    "step_judge": {},
    "turn_judge": {},
    "string_match": {},
    "think_answer_format": {},
    "tool_call": {},
    "text_similarity": {},
    "vote": {"judge": {"type": "pointwise_judge", "temperature": 0.5}},
}
#: A representative bad value of each type: (option path, bad config, what the error says).
BAD = {
    "code_execution": ("test_timeout_s", {"test_timeout_s": 0}, "Input should be greater than 0"),
    "combine": ("mode", {"mode": "max"}, "Input should be 'weighted_sum' or 'min'"),
    "dpo_implicit": ("beta", {"beta": 0}, "Input should be greater than 0"),
    "ensemble": ("combine", {"combine": "max"}, "Input should be 'mean_minus_std', 'mean_minus_variance'"),
    "fallback": ("fall_through.0", {"fall_through": ["ok"]}, "Input should be 'not_applicable'"),
    "implicit_prm": ("aggregate", {"aggregate": "product"}, "Input should be 'min', 'last'"),
    "instruction_following": ("benchmark", {"benchmark": "ifeval2"}, "Input should be 'ifeval' or 'ifbench'"),
    "json_schema": ("max_errors", {"max_errors": 0}, "Input should be greater than or equal to 1"),
    "length": ("unit", {"unit": "bytes"}, "Input should be 'tokens', 'chars' or 'words'"),
    "length_controlled": ("fit", {"fit": "prompt"}, "Input should be 'group', 'batch' or 'calibration'"),
    "final_answer": ("reward", {"reward": {"kind": "math_answer"}}, "should be a reward config"),
    "per_turn": ("max_turns", {"max_turns": 0}, "Input should be greater than or equal to 1"),
    "environment_state": ("match", {"match": "equal"}, "Input should be 'subset' or 'exact'"),
    "listwise_judge": ("orderings", {"orderings": 0}, "Input should be greater than or equal to 1"),
    "math_answer": ("cas_budget_s", {"cas_budget_s": 0}, "Input should be greater than 0"),
    "monte_carlo_steps": ("n", {"n": 0}, "Input should be greater than or equal to 1"),
    "pairwise_judge": ("against", {"against": "all"}, "Input should be 'group' or 'baseline'"),
    "pointwise_judge": ("scale", {"scale": [1, 5, 9]}, "Tuple should have at most 2 items"),
    "prm": ("family", {"family": "qwen"}, "Input should be 'qwen_prm', 'math_shepherd'"),
    "progress_advantage": ("token_aggregate", {"token_aggregate": "max"}, "Input should be 'sum' or 'mean'"),
    "reference_scaffolded_judge": (
        "steps.max_steps",
        {"steps": {"max_steps": 0}},
        "Input should be greater than or equal to 1",
    ),
    "regex_match": ("mode", {"mode": "match"}, "Input should be 'search' or 'fullmatch'"),
    "remote": ("retries", {"retries": -1}, "Input should be greater than or equal to 0"),
    "repetition_penalty": ("max_penalty", {"max_penalty": 0.5}, "Input should be less than or equal to 0"),
    "reward_model": ("truncation", {"truncation": "middle"}, "Input should be 'refuse', 'left' or 'right'"),
    "route": ("by", {"by": 3}, "Input should be a valid string"),
    "rubric": ("aggregate", {"aggregate": "mean"}, "Input should be 'points', 'weighted_sum'"),
    "self_proposed_rubric": ("min_group", {"min_group": 1}, "Input should be greater than or equal to 2"),
    "served_reward_model": ("batch_size", {"batch_size": 0}, "Input should be greater than or equal to 1"),
    "soft_overlong": ("cache_length", {"cache_length": -1}, "Input should be greater than or equal to 0"),
    "step_judge": ("steps.split", {"steps": {"split": "sentences"}}, "Input should be 'auto', 'paragraphs'"),
    "turn_judge": ("mode", {"mode": "per_turn"}, "Input should be 'per_step' or 'one_call'"),
    "string_match": ("extract", {"extract": "first_line"}, "Input should be 'answer_tag', 'last_line'"),
    "think_answer_format": ("think_tag", {"think_tag": "<think>"}, "String should match pattern"),
    "tool_call": ("max_calls", {"max_calls": 0}, "Input should be greater than or equal to 1"),
    "text_similarity": ("metric", {"metric": "bertscore"}, "Input should be 'token_f1', 'exact_match'"),
    "vote": ("n", {"n": 1}, "Input should be greater than or equal to 2"),
}


def test_the_cases_here_cover_every_builtin_type():
    assert set(MINIMAL) == set(BAD) == set(BUILTIN_REWARDS)


def described_fields(model: type[BaseModel], seen: set | None = None):
    """(model, field name, description) of every field of ``model`` and the models it holds."""
    seen = set() if seen is None else seen
    if model in seen:
        return
    seen.add(model)
    for name, field in model.model_fields.items():
        yield model, name, field.description
        for nested in _models(field.annotation):
            yield from described_fields(nested, seen)


def _models(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for argument in getattr(annotation, "__args__", ()) for m in _models(argument)]


@pytest.mark.parametrize("kind", sorted(BUILTIN_REWARDS))
def test_every_type_declares_a_model_whose_every_field_is_described(kind):
    cls = reward_class(kind)
    model = options_model(kind)
    assert declared_model(cls) is model and issubclass(model, RewardOptions)
    undescribed = [f"{m.__name__}.{name}" for m, name, text in described_fields(model) if not text]
    assert undescribed == []


@pytest.mark.parametrize("kind", sorted(BUILTIN_REWARDS))
def test_the_constructor_takes_exactly_the_model_options_with_its_defaults(kind):
    cls, model = reward_class(kind), options_model(kind)
    taken = signature_options(cls)
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    assert set(taken) == set(fields)
    for key, default in taken.items():
        if default is inspect.Parameter.empty:
            assert fields[key].is_required(), key
        else:
            assert fields[key].get_default(call_default_factory=True) == default, key


def test_a_constructor_whose_defaults_drift_from_its_model_is_refused_when_defined():
    class Options(RewardOptions):
        size: int = 3
        """How big."""

    with pytest.raises(TypeError, match="size defaults to 3 in the model and to 4 in the constructor"):

        @takes_options(Options)
        class Drifted(Reward):
            def __init__(self, *, size: int = 4, name: str | None = None):
                self.size = size

            async def ascore(self, samples):
                return []

    with pytest.raises(TypeError, match=r"only in the constructor: \['colour'\]"):

        @takes_options(Options)
        class Extra(Reward):
            def __init__(self, *, size: int = 3, colour: str = "red", name: str | None = None):
                self.size = size

            async def ascore(self, samples):
                return []


@pytest.mark.parametrize("kind", sorted(BUILTIN_REWARDS))
def test_a_bad_value_is_refused_from_a_config_and_from_python_alike(kind):
    option, bad, message = BAD[kind]
    config = {"type": kind, **MINIMAL[kind], **bad}
    with pytest.raises(ConfigError) as from_config:
        build({"type": "combine", "components": {"x": config}})
    assert str(from_config.value).startswith(f"components.x.{option}: {message}")
    cls = reward_class(kind)
    with pytest.raises(ConfigError) as from_python:
        cls(**{**MINIMAL[kind], **bad})
    assert str(from_python.value).startswith(f"{cls.__name__}.{option}: {message}")
    # The same check: the same words after the path.
    assert str(from_python.value).split(": ", 1)[1] == str(from_config.value).split(": ", 1)[1]
    # And the schema an editor checks the file with refuses it too.
    assert not jsonschema.Draft202012Validator(options_schema(kind)).is_valid(config)
    assert jsonschema.Draft202012Validator(options_schema(kind)).is_valid({"type": kind, **MINIMAL[kind]})


@pytest.mark.parametrize("kind", sorted(BUILTIN_REWARDS))
def test_an_unknown_option_is_named_with_the_accepted_ones(kind):
    with pytest.raises(ConfigError) as error:
        build({"type": "route", "routes": {"r": {"type": kind, **MINIMAL[kind], "colour": "red"}}})
    text = str(error.value)
    assert text.startswith("routes.r.colour: unknown option; accepted options: ")
    accepted = text.split("accepted options: ")[1].split(", ")
    model = options_model(kind)
    assert sorted(accepted) == sorted(f.alias or n for n, f in model.model_fields.items())


@pytest.mark.parametrize("kind", sorted(BUILTIN_REWARDS))
def test_each_schema_is_valid_json_schema_and_names_its_type(kind):
    schema = options_schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["type"]["const"] == kind and "type" in schema["required"]
    assert schema["additionalProperties"] is False
    assert not jsonschema.Draft202012Validator(schema).is_valid({"type": "other", **MINIMAL[kind]})


def test_any_config_schema_is_valid_and_checks_nested_rewards():
    schema = config_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for kind in BUILTIN_REWARDS:
        assert validator.is_valid({"type": kind, **MINIMAL[kind]}), kind
    assert validator.is_valid(yaml.safe_load((ROOT / "examples" / "reward.yaml").read_text()))
    nested = {"type": "combine", "components": {"a": {"type": "math_answer", "weight": 2}}}
    assert validator.is_valid(nested)
    nested["components"]["a"]["cas_budget_s"] = 0
    assert not validator.is_valid(nested)
    # A weight belongs to a component, not to a reward anywhere.
    assert not validator.is_valid({"type": "route", "routes": {"a": {"type": "math_answer", "weight": 2}}})


def test_the_example_config_validates_against_its_types_schema():
    config = yaml.safe_load((ROOT / "examples" / "reward.yaml").read_text())
    jsonschema.Draft202012Validator(options_schema("route")).validate(config)


def test_a_partial_step_block_keeps_the_rewards_own_defaults(scripted):
    backend = {"type": "openai", "base_url": scripted.url, "model": "scripted"}
    judge = build({"type": "step_judge", "backend": backend, "steps": {"split": "lines"}})
    assert (judge.steps.split, judge.steps.max_steps) == (
        "lines",
        options_model("step_judge")().steps.max_steps,
    )
    scaffolded = build({"type": "reference_scaffolded_judge", "backend": backend, "steps": {"max_steps": 3}})
    assert (scaffolded.steps.split, scaffolded.steps.max_steps) == ("paragraphs", 3)
    with pytest.raises(ConfigError, match=r"^steps\.pattern: goes with split: regex"):
        build({"type": "step_judge", "backend": backend, "steps": {"split": "regex"}})


def test_nested_backend_and_client_configs_are_checked_where_they_sit():
    with pytest.raises(ConfigError, match=r"^backend\.openai\.model: Field required"):
        build({"type": "pointwise_judge", "backend": {"type": "openai"}})
    with pytest.raises(ConfigError, match=r"^backend: .*'local', 'openai', 'http', 'litellm'"):
        build({"type": "pointwise_judge", "backend": {"type": "vllm", "model": "m"}})
    with pytest.raises(
        ConfigError, match=r"^client\.max_attempts: Input should be greater than or equal to 1"
    ):
        build({"type": "pairwise_judge", "client": {"max_attempts": 0}})
    with pytest.raises(ConfigError, match=r"^limits\.procs: unknown option; accepted options: memory_bytes"):
        build({"type": "code_execution", "limits": {"procs": 8}})
    with pytest.raises(ConfigError, match=r"^continuer\.top_p: is no option of a served policy"):
        build(
            {
                "type": "monte_carlo_steps",
                "verifier": {"type": "math_answer"},
                "continuer": {"backend": {"type": "http", "model": "m", "base_url": "u"}, "top_p": 0.5},
            }
        )
    with pytest.raises(ConfigError, match=r"^verifier\.cas_budget_s: Input should be greater than 0"):
        build({"type": "monte_carlo_steps", "verifier": {"type": "math_answer", "cas_budget_s": 0}})


def kind_of(config):
    (kind,) = typing.get_args(config.model_fields["type"].annotation)
    return kind


def test_nested_configs_defaults_are_those_of_the_objects_they_make():
    assert client_options(None) == ClientOptions() == client_options({})
    assert RetryConfig().options() == ClientOptions(cache=None)
    assert client_options({"max_attempts": 2}) == ClientOptions(max_attempts=2)
    assert dataclasses.asdict(SandboxLimits()) == SandboxLimitsOptions().model_dump()
    configs = typing.get_args(typing.get_args(BackendConfig)[0])
    assert sorted(kind_of(config) for config in configs) == sorted(BACKENDS)
    for config in configs:
        kind = kind_of(config)
        module, _, name = BACKENDS[kind].partition(":")
        parameters = inspect.signature(getattr(importlib.import_module(module), name)).parameters
        for option, field in config.model_fields.items():
            if option == "type":
                continue
            default = parameters[option].default
            if default is inspect.Parameter.empty:
                assert field.is_required(), (kind, option)
            else:
                assert field.get_default() == default, (kind, option)


def test_a_backend_config_makes_its_backend():
    backend = make_backend({"type": "http", "model": "m", "base_url": "http://h/v1", "logprobs": False})
    assert (type(backend).__name__, backend.supports_logprobs, backend.continue_final) == (
        "HTTPBackend",
        False,
        "fields",
    )
    with pytest.raises(ValueError, match=r"backend: http\.base_url: Field required"):
        make_backend({"type": "http", "model": "m"})


# Behaviour: a reward built without an option does what its model's default says.


def default(kind, option):
    return options_model(kind).model_fields[option].get_default(call_default_factory=True)


def test_math_answer_values_are_the_declared_defaults():
    reward = rewardlab.MathAnswerReward(execution="inline", use_cas=False)
    right, wrong = reward.score(
        [Sample(completion="\\boxed{4}", reference="4"), Sample(completion="\\boxed{5}", reference="4")]
    )
    reward.close()
    assert (right.value, wrong.value) == (
        default("math_answer", "correct_value"),
        default("math_answer", "incorrect_value"),
    )


def test_regex_max_chars_is_the_declared_default():
    reward = rewardlab.rewards.format.RegexMatchReward("a", execution="inline")
    limit = default("regex_match", "max_chars")
    within, over = reward.score([Sample(completion="a" * limit), Sample(completion="a" * (limit + 1))])
    assert within.value == 1.0 and over.value == 0.0 and f"max_chars={limit}" in over.reason


def test_repetition_penalty_counts_the_declared_ngrams_and_penalty():
    n, penalty = default("repetition_penalty", "ngram_size"), default("repetition_penalty", "max_penalty")
    words = ["w"] * (n + 1)  # n + 1 words of one kind: two n-grams, both the same
    (score,) = rewardlab.rewards.shaping.RepetitionPenalty().score([Sample(completion=" ".join(words))])
    assert score.details["ngram_size"] == n and score.value == pytest.approx(0.5 * penalty)


def test_shaping_measures_in_the_declared_unit():
    unit = default("soft_overlong", "unit")
    reward = rewardlab.rewards.shaping.SoftOverlongPunishment(max_length=4, cache_length=1)
    (score,) = reward.score([Sample(completion="one two", fields={"completion_ids": [1, 2, 3, 4, 5]})])
    assert score.details["unit"] == unit and score.details["length"] == 5  # the ids, not the words


def test_json_schema_lists_the_declared_number_of_errors():
    limit = default("json_schema", "max_errors")
    schema = {"type": "object", "properties": {f"k{i}": {"type": "string"} for i in range(limit + 5)}}
    completion = json.dumps({f"k{i}": i for i in range(limit + 5)})
    reward = rewardlab.JsonSchemaReward(schema=schema, execution="inline")
    (score,) = reward.score([Sample(completion=completion)])
    assert score.details["error_count"] == limit + 5 and len(score.details["errors"]) == limit


def test_string_match_normalizes_by_default():
    assert default("string_match", "normalize") is True
    (score,) = rewardlab.StringMatchReward(execution="inline").score(
        [Sample(completion="Paris.", reference="paris")]
    )
    assert score.value == 1.0


def test_instruction_following_folds_by_the_declared_rule():
    assert default("instruction_following", "aggregate") == "fraction"
    sample = Sample(
        completion="Hello world, twice.",
        fields={
            "instruction_id_list": ["punctuation:no_comma", "length_constraints:number_words"],
            "kwargs": [{}, {"num_words": 5, "relation": "less than"}],
        },
    )
    (score,) = rewardlab.InstructionFollowingReward(execution="inline").score([sample])
    assert score.value == 0.5


def test_combine_gate_uses_the_declared_threshold_and_fail_value():
    class Fixed(Reward):
        def __init__(self, value):
            self.value, self.name = value, f"fixed{value}"

        async def ascore(self, samples):
            return [Score(self.value) for _ in samples]

    threshold, fail = default("combine", "gate_threshold"), default("combine", "gate_fail_value")
    passed = rewardlab.Combine({"a": Fixed(0.3)}, gate=Fixed(threshold)).score([Sample()])[0]
    closed = rewardlab.Combine({"a": Fixed(0.3)}, gate=Fixed(threshold - 0.01)).score([Sample()])[0]
    assert (passed.value, closed.value) == (0.3, fail)


def test_a_served_reward_model_sends_the_declared_number_of_samples_a_request():
    size = default("served_reward_model", "batch_size")
    with ScriptedPoolingServer("sglang") as server:
        reward = build({"type": "served_reward_model", "url": server.url, "protocol": "sglang"})
        reward.score([Sample(prompt="p", completion="c")] * (size + 1))
    assert sorted(len(body["text"]) for body in server.requests) == [1, size]


def test_the_step_judge_asks_about_the_declared_number_of_steps(scripted):
    scripted.default = Reply(text=json.dumps({"verdict": "correct"}))
    backend = {"type": "openai", "base_url": scripted.url, "model": "scripted"}
    judge = build({"type": "step_judge", "backend": backend, "client": {"cache": None}})
    limit = default("step_judge", "steps").max_steps
    (score,) = judge.score(
        [Sample(prompt="q", completion="\n".join(f"{i} + 1 = {i + 1}" for i in range(30)))]
    )
    assert len(score.steps) == limit == len(scripted.requests)


def test_the_listwise_judge_asks_the_declared_number_of_orderings(scripted):
    scripted.default = Reply(text=json.dumps({"scores": [5, 5, 5]}))
    backend = {"type": "openai", "base_url": scripted.url, "model": "scripted"}
    judge = build({"type": "listwise_judge", "backend": backend, "client": {"cache": None}})
    scores = judge.score([Sample(prompt="q", completion=c) for c in ("one", "two", "three")])
    assert all(s.ok for s in scores) and len(scripted.requests) == default("listwise_judge", "orderings")


def test_the_scaffolded_judge_grades_the_declared_segments(scripted):
    def labels(body):
        count = body["messages"][-1]["content"].count("<<<BEGIN SEGMENT")
        return Reply(text=json.dumps({"segments": {str(k + 1): "progress" for k in range(count)}}))

    scripted.default = labels
    backend = {"type": "openai", "base_url": scripted.url, "model": "scripted"}
    judge = build(
        {
            "type": "reference_scaffolded_judge",
            "backend": backend,
            "client": {"cache": None},
            "level": "process",
            "scaffold": "reference",
            "process_calls": "one",
        }
    )
    completion = "\n\n".join(f"Paragraph {i}." for i in range(20))
    (score,) = judge.score([Sample(prompt="q", completion=completion, reference="r")])
    assert score.ok, score.reason
    assert len(score.steps) == default("reference_scaffolded_judge", "steps").max_steps


# Rewards registered without a model get one from their constructor.


@register("options_test_user_reward")
class Halver(Reward):
    """Half of a fixed value.

    Args:
        value: The value halved.
        label: Where it goes.
    """

    def __init__(self, value: float, label: str = "half", name: str = "halver"):
        self.value, self.label, self.name = value, label, name

    async def ascore(self, samples):
        return [Score(self.value / 2) for _ in samples]


def test_a_user_reward_gets_a_model_from_its_constructor():
    model = options_model("options_test_user_reward")
    assert list(model.model_fields) == ["value", "label", "name"]
    assert model.model_fields["value"].description == "The value halved."
    assert model.model_fields["value"].is_required() and model.model_fields["label"].default == "half"
    schema = options_schema("options_test_user_reward")
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["value"]["type"] == "number"
    with pytest.raises(ConfigError, match=r"^value: Input should be a valid number"):
        build({"type": "options_test_user_reward", "value": "x"})
    with pytest.raises(ConfigError, match=r"^lable: unknown option; accepted options: value, label, name"):
        build({"type": "options_test_user_reward", "value": 1, "lable": "x"})
    reward = build({"type": "options_test_user_reward", "value": 3})
    assert reward.label == "half" and reward.score([Sample()])[0].value == 1.5
    assert "options_test_user_reward" in json.dumps(config_schema())


def test_a_failed_check_of_a_built_reward_still_names_its_place():
    # Only a built judge can tell that its backend gives no log-probabilities.
    backend = {"type": "http", "model": "m", "base_url": "http://h/v1", "logprobs": False}
    with pytest.raises(ConfigError, match=r"^components\.j: pointwise_judge: verdict_from='logprobs' needs"):
        build(
            {
                "type": "combine",
                "components": {
                    "j": {"type": "pointwise_judge", "backend": backend, "verdict_from": "logprobs"}
                },
            }
        )

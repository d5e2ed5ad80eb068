"""Short names for rewards, and `build`: a reward pipeline from a dict or a YAML file.

The same config drives the Python API, the TRL adapter, ``rewardlab score``, the server and the
benchmark runner. A config is a mapping with a ``type`` (a registered short name) and the reward's
options - the fields of its options model (`rewardlab.rewards.options`), which the reward's
constructor validates whether it is called from here or from Python; composite rewards
(``combine``, ``route``) hold nested configs::

    type: combine
    components:
      accuracy: {type: math_answer, weight: 1.0}
      format: {type: think_answer_format, weight: 0.1}

Built-in rewards are listed here by import path and imported on first use, so that building a
format check never pays for importing a CAS.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from rewardlab.errors import ConfigError, MissingDependency
from rewardlab.optional import missing_dependency
from rewardlab.rewards.contract import Reward

BUILTIN_REWARDS: dict[str, str] = {
    "combine": "rewardlab.rewards.combine:Combine",
    "route": "rewardlab.rewards.combine:Route",
    "ensemble": "rewardlab.rewards.ensemble:EnsembleReward",
    "fallback": "rewardlab.rewards.fallback:Fallback",
    "length_controlled": "rewardlab.rewards.length_controlled:LengthControlledReward",
    "final_answer": "rewardlab.rewards.trajectory_rewards:FinalAnswerReward",
    "per_turn": "rewardlab.rewards.trajectory_rewards:PerTurnReward",
    "environment_state": "rewardlab.rewards.trajectory_rewards:EnvironmentStateReward",
    "math_answer": "rewardlab.rewards.math.reward:MathAnswerReward",
    "think_answer_format": "rewardlab.rewards.format:ThinkAnswerFormatReward",
    "regex_match": "rewardlab.rewards.format:RegexMatchReward",
    "string_match": "rewardlab.rewards.format:StringMatchReward",
    "json_schema": "rewardlab.rewards.json_schema:JsonSchemaReward",
    "tool_call": "rewardlab.rewards.tool_calls.reward:ToolCallReward",
    "text_similarity": "rewardlab.rewards.text_similarity.reward:TextSimilarityReward",
    "soft_overlong": "rewardlab.rewards.shaping:SoftOverlongPunishment",
    "repetition_penalty": "rewardlab.rewards.shaping:RepetitionPenalty",
    "length": "rewardlab.rewards.shaping:LengthReward",
    "instruction_following": "rewardlab.rewards.instructions:InstructionFollowingReward",
    "code_execution": "rewardlab.rewards.code.reward:CodeExecutionReward",
    "pointwise_judge": "rewardlab.judges.pointwise:PointwiseJudge",
    "pairwise_judge": "rewardlab.judges.pairwise:PairwiseJudge",
    "listwise_judge": "rewardlab.judges.listwise:ListwiseJudge",
    "reference_scaffolded_judge": "rewardlab.judges.scaffolded:ReferenceScaffoldedJudge",
    "vote": "rewardlab.judges.vote:Vote",
    "rubric": "rewardlab.rubrics.grading:RubricReward",
    "self_proposed_rubric": "rewardlab.rubrics.self_proposed:SelfProposedRubricReward",
    "progress_advantage": "rewardlab.prm.implicit:ProgressAdvantageReward",
    "implicit_prm": "rewardlab.prm.implicit:ImplicitPRMReward",
    "prm": "rewardlab.prm.discriminative:DiscriminativePRMReward",
    "monte_carlo_steps": "rewardlab.prm.monte_carlo:MonteCarloStepReward",
    "step_judge": "rewardlab.prm.step_judge:StepJudge",
    "turn_judge": "rewardlab.prm.turn_judge:TurnJudge",
    "reward_model": "rewardlab.reward_models.sequence_classifier:SequenceClassifierReward",
    "dpo_implicit": "rewardlab.reward_models.dpo:DPOImplicitReward",
    "served_reward_model": "rewardlab.reward_models.served:ServedRewardModel",
    "remote": "rewardlab.serving.remote:RemoteReward",
}

_user_rewards: dict[str, type[Reward]] = {}


def register(short_name: str) -> Callable[[type[Reward]], type[Reward]]:
    """Class decorator that makes a user-defined reward buildable by ``type: short_name``."""

    def decorate(cls: type[Reward]) -> type[Reward]:
        if short_name in BUILTIN_REWARDS or short_name in _user_rewards:
            raise ValueError(f"a reward is already registered as {short_name!r}")
        _user_rewards[short_name] = cls
        return cls

    return decorate


def available() -> list[str]:
    """Every short name that `build` accepts."""
    return sorted({*BUILTIN_REWARDS, *_user_rewards})


def reward_class(short_name: str) -> type[Reward]:
    """The reward class behind a short name."""
    if short_name in _user_rewards:
        return _user_rewards[short_name]
    if short_name not in BUILTIN_REWARDS:
        raise KeyError(short_name)
    module_name, class_name = BUILTIN_REWARDS[short_name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise missing_dependency(error, f"the {short_name!r} reward") from None
    return getattr(module, class_name)


def load_config(source: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """A config mapping from a mapping or a YAML/JSON file path."""
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    try:
        loaded = yaml.safe_load(path.read_text())
    except OSError as error:
        raise ConfigError("", f"cannot read config file {path}: {error}") from error
    except yaml.YAMLError as error:
        raise ConfigError("", f"{path} is not valid YAML: {error}") from error
    if not isinstance(loaded, Mapping):
        raise ConfigError("", f"{path} must hold a mapping with a 'type' key")
    return dict(loaded)


def build(config: Mapping[str, Any] | str | Path, *, path: str = "") -> Reward:
    """Build a reward from a config mapping or a YAML file.

    Args:
        config: ``{"type": <short name>, **constructor arguments}``, or a path to a YAML file
            holding one. ``name`` is passed through to the reward.
        path: Where this config sits inside a larger one; used in error messages.

    Example:
        >>> reward = build({"type": "string_match", "normalize": True})
        >>> reward.name
        'string_match'
    """
    # Imported here, not with the module: pydantic takes 55 ms to import, and ``import rewardlab``
    # (which imports this module for `build`) should not pay for it before a reward is built.
    from rewardlab.rewards.options import config_path, declared_model, derived_model, given_options

    options = load_config(config)
    kind = options.pop("type", None)
    if not isinstance(kind, str):
        raise ConfigError(path, f"missing 'type'; one of: {', '.join(available())}")
    try:
        cls = reward_class(kind)
    except MissingDependency as error:
        raise ConfigError(path, str(error)) from None
    except KeyError:
        raise ConfigError(path, f"unknown reward type {kind!r}; one of: {', '.join(available())}") from None
    if declared_model(cls) is None:
        options = given_options(derived_model(cls), options, path=path)
    with config_path(path):
        try:
            return cls(**options)
        except ConfigError:
            raise
        except (TypeError, ValueError) as error:
            # What only a built reward can tell: a backend without log-probabilities, a template
            # file that is not there.
            raise ConfigError(path, f"{kind}: {error}") from error


def built(spec: Reward | Mapping[str, Any], *parts: object) -> Reward:
    """A nested reward of the one being built: ``spec`` itself, or the reward its config builds,
    with errors naming its place (``parts`` under the current config path)."""
    from rewardlab.rewards.options import nested_path

    if isinstance(spec, Reward):
        return spec
    return build(spec, path=nested_path(*parts))

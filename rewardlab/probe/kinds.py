"""Which exploits apply to a reward: the reward kinds that score each sample.

A reward says what kind of grader it is in one of two ways, looked up in this order:

1. a ``probe_kinds`` class attribute (a set of kinds from `rewardlab.probe.exploit.KINDS`, or of
   one's own) - the way for a reward of one's own, registered with `rewardlab.register`;
2. `BUILTIN_KINDS`, by the short name a built-in reward is registered under.

A reward that holds others in its attributes (`Combine`, `Route`, an ensemble, a
length-controlled reward, a kimi-mode ``length`` reward with its ``correctness`` check, a PRM with
its verifier) is looked through: a sample gets the kinds of the rewards that actually score it
(the route its field selects; every component, member, gate and check), so a math row of a mixed
pipeline is probed with answer games and a chat row with judge games. A holder that says its own
kinds keeps them and adds those of what it holds - its value is decided by what it holds too:
Kimi's length reward pays a short answer only when its correctness check passes, so the games
against that check (a box with nothing in it) are games against the length reward. A holder that
says nothing has no kinds of its own. Any other reward that says neither gets every exploit: the
probe does not guess what a grader it does not know can be fooled by.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rewardlab.probe.exploit import KINDS
from rewardlab.rewards.combine import Route
from rewardlab.rewards.contract import Reward, Sample
from rewardlab.rewards.registry import BUILTIN_REWARDS

#: Built-in rewards by short name. Shaping terms (length, repetition, overlong) have no kind of
#: their own: only the exploits that target ``any`` reward apply to them.
BUILTIN_KINDS: dict[str, frozenset[str]] = {
    "math_answer": frozenset({"math"}),
    # Exact and pattern matches serve as answer checks as often as format checks.
    "string_match": frozenset({"math", "format"}),
    "think_answer_format": frozenset({"format"}),
    "regex_match": frozenset({"format", "math"}),
    "json_schema": frozenset({"format"}),
    # Calls are structured output checked against a reference, like an answer.
    "tool_call": frozenset({"format", "math"}),
    # A reference answer matched in words: the answer games (hedges, several answers, an echoed
    # question) and the format games apply.
    "text_similarity": frozenset({"format", "math"}),
    "instruction_following": frozenset({"format"}),
    "soft_overlong": frozenset(),
    "repetition_penalty": frozenset(),
    "length": frozenset(),
    "code_execution": frozenset({"code"}),
    "pointwise_judge": frozenset({"judge"}),
    "pairwise_judge": frozenset({"judge"}),
    "listwise_judge": frozenset({"judge"}),
    "reference_scaffolded_judge": frozenset({"judge"}),
    "rubric": frozenset({"rubric", "judge"}),
    "self_proposed_rubric": frozenset({"rubric", "judge"}),
    "progress_advantage": frozenset({"judge", "math"}),
    "implicit_prm": frozenset({"judge", "math"}),
    "prm": frozenset({"judge", "math"}),
    "monte_carlo_steps": frozenset({"judge", "math"}),
    "step_judge": frozenset({"judge", "math"}),
    "turn_judge": frozenset({"judge"}),
    # Reads the environment's state, not the completion's text.
    "environment_state": frozenset(),
    "reward_model": frozenset({"judge"}),
    "dpo_implicit": frozenset({"judge"}),
    "served_reward_model": frozenset({"judge"}),
}
#: Built-in rewards that only wrap others: looked through, with no kinds of their own. (A reward
#: with kinds of its own that holds others, such as ``length`` with a ``correctness`` check, is
#: looked through too; see the module docstring.)
LOOKED_THROUGH = frozenset(
    {"combine", "route", "ensemble", "length_controlled", "fallback", "vote", "final_answer", "per_turn"}
)
#: What a reward that does not say gets: every kind.
ALL_KINDS = frozenset(KINDS)
_SHORT_NAMES = {path: name for name, path in BUILTIN_REWARDS.items()}


def short_name(reward: Reward) -> str | None:
    """The short name a built-in reward is registered under, or None for any other reward."""
    cls = type(reward)
    return _SHORT_NAMES.get(f"{cls.__module__}:{cls.__qualname__}")


def _said_kinds(reward: Reward) -> frozenset[str] | None:
    declared: Iterable[str] | None = getattr(reward, "probe_kinds", None)
    if declared is not None:
        return frozenset(declared)
    name = short_name(reward)
    return BUILTIN_KINDS.get(name) if name is not None else None


def declared_kinds(reward: Reward) -> frozenset[str]:
    """The kinds of one reward that is not looked through (see the module docstring)."""
    said = _said_kinds(reward)
    return ALL_KINDS if said is None else said


def wrapped_rewards(reward: Reward) -> list[Reward]:
    """The rewards ``reward`` holds in its attributes, directly or in a mapping or a list."""
    found: list[Reward] = []
    for value in vars(reward).values():
        if isinstance(value, Reward):
            found.append(value)
        elif isinstance(value, Mapping):
            found += [item for item in value.values() if isinstance(item, Reward)]
        elif isinstance(value, list | tuple):
            found += [item for item in value if isinstance(item, Reward)]
    return found


def scoring_rewards(reward: Reward, sample: Sample) -> list[Reward]:
    """The rewards that score ``sample`` through ``reward``: through a `Route`, those of the route
    its field selects (none when no route matches and there is no default); through any other
    reward that holds rewards, those of every held one, and the holder itself when it says its own
    kinds (a kimi ``length`` reward and its ``correctness`` check); any other reward is itself."""
    if isinstance(reward, Route):
        key = sample.fields.get(reward.by)
        chosen = reward.routes.get(str(key)) if key is not None else None
        chosen = chosen or reward.default
        return [] if chosen is None else scoring_rewards(chosen, sample)
    held = [leaf for inner in wrapped_rewards(reward) for leaf in scoring_rewards(inner, sample)]
    if held and _said_kinds(reward) is None:
        return held
    return [reward, *held]


def sample_kinds(reward: Reward, sample: Sample) -> frozenset[str] | None:
    """The kinds of the rewards that score ``sample``; None when no reward inside scores it."""
    leaves = scoring_rewards(reward, sample)
    if not leaves:
        return None
    return frozenset().union(*(declared_kinds(leaf) for leaf in leaves))

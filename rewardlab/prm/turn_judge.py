"""`TurnJudge`: the generative step judge (`StepJudge`) over an agent trajectory's turns.

A step of an agent is one assistant turn - its text, the tools it called with their arguments,
and (by default) what the tools returned - not a paragraph of its text: `StepJudge` alone would
split a trajectory at assistant messages and judge their text only, so a turn that only calls a
tool would be no step and a wrong argument would go unseen. Here each turn is rendered by
`rewardlab.rewards.trajectory.turn_text` and handed to the step judge as a given step, so every
`StepJudge` option works as it does for solutions: ``per_step`` (one call per turn, judged given
the turns before it; the default template asks about agent turns, ``turn_judge_turn.jinja``) or
``one_call`` (ThinkPRM-style, every turn's verdict in one answer), ``aggregate``,
``use_reference``, and the backend, client and verdict options every judge shares.

This is turn-level credit with an LLM judge, as in TARL (Zeng et al. 2025, arXiv:2505.11821,
github.com/SiliangZeng/Multi-Turn-RL-Agent: a turn-level reward for each tool-use turn beside
the outcome reward) and SCRIBE's step judging (Jiang and Ferraro 2026, arXiv:2601.03555): a
judge checks each intermediate step; SCRIBE's rubric per step is what `per_turn` over a
``rubric`` reward gives (`rewardlab.rewards.trajectory_rewards`). `Score.steps` has one
probability of "correct" per assistant turn, in order (an empty assistant message, with no
text and no call, is no step); a trajectory with nothing written or called gets the judge's
minimum without a call, as an empty solution does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import model_validator

from rewardlab.prm.step_judge import JUDGED_STEPS, StepJudge, StepJudgeOptions
from rewardlab.rewards.contract import Sample, Score
from rewardlab.rewards.options import OptionError, takes_options
from rewardlab.rewards.steps import Aggregate, StepOptions
from rewardlab.rewards.trajectory import read_trajectories, turn_text

#: Where the turns go as given steps on the step judge's copy of a sample.
_TURNS_FIELD = "trajectory_turns"


class TurnJudgeOptions(StepJudgeOptions):
    """Options of `TurnJudge`: those of `StepJudgeOptions`, but ``steps`` (a turn is a step)."""

    observations: bool = True
    """Show each turn's tool results (and user replies) with it: the consequence of its action."""

    @model_validator(mode="after")
    def _no_steps(self) -> TurnJudgeOptions:
        if "steps" in self.model_fields_set:
            raise OptionError("steps", "is not read by turn_judge: each assistant turn is one step")
        return self


@takes_options(TurnJudgeOptions)
class TurnJudge(StepJudge):
    """Per-turn verdicts from an LLM judge over a trajectory (see the module docstring).

    Options: `TurnJudgeOptions` (``observations``, and `StepJudgeOptions`' ``mode``,
    ``aggregate`` and ``use_reference``; ``steps`` is refused), and the backend, client,
    template and verdict options every judge shares (`JudgeOptions`).
    """

    name = "turn_judge"

    def __init__(
        self,
        *,
        observations: bool = True,
        mode: Literal["per_step", "one_call"] = "per_step",
        aggregate: Aggregate = "min",
        use_reference: bool = False,
        steps: StepOptions = JUDGED_STEPS,
        **options: Any,
    ):
        if mode == "per_step" and options.get("template") is None:
            options["template"] = "turn_judge_turn.jinja"
        steps = StepOptions(field=_TURNS_FIELD)  # the turns, given as steps, kept as given
        super().__init__(mode=mode, aggregate=aggregate, use_reference=use_reference, steps=steps, **options)
        self.observations = observations

    async def judge_batch(self, samples: Sequence[Sample]) -> list[Score]:
        scores, readable = read_trajectories(samples)
        judged = []
        for index, trajectory in readable:
            sample = samples[index]
            turns = [turn_text(turn, observations=self.observations) for turn in trajectory.turns]
            if not any(text.strip() for text in turns):
                turns = []  # nothing written and nothing called: the step judge's empty completion
            # Joined with blank lines and given as steps, each turn is found whole in the text.
            judged.append(
                replace(
                    sample,
                    completion="\n\n".join(turns),
                    fields={**sample.fields, _TURNS_FIELD: [text for text in turns if text.strip()]},
                )
            )
        for (index, _), score in zip(readable, await super().judge_batch(judged), strict=True):
            scores[index] = score
        return scores  # type: ignore[return-value]  # every index is set above

"""An agent trajectory as rewards read it: turns, tool calls, tool results, and the final state.

A multi-turn rollout is a list of chat messages: assistant messages (with text, OpenAI-style
``tool_calls``, or both), the ``tool`` messages that answer the calls, and possibly ``user``
messages (a simulated user, an environment's observation). This is what TRL's GRPOTrainer passes
as a completion when it runs tools (``trl/trainer/grpo_trainer.py``, ``_tool_call_loop``: each
result is appended as ``{"role": "tool", "name": ..., "content": str(result)}``) and what
verifiers' ``MultiTurnEnv`` rollouts hold.

`read_trajectory` splits one into `Turn`s - one per assistant message, each with the messages
that answer it (tool results, a user's reply) - and validates it on the way: a malformed message
is an `InvalidInput` that names its place (``completion[2].tool_calls[0].function.arguments``), which
a reward turns into status ``invalid_input`` with the sample's label. A text completion is a
trajectory of one turn, so a trajectory reward also scores plain completions.

Turn boundaries follow the policy's decisions, not the text: a turn is one assistant message
(one action, as in TARL's turn-level credit assignment, where the reward of turn k is the
judgement of action k given the history), so step rewards over a trajectory get `Score.steps`
with one value per assistant turn. Tool results belong to the turn whose calls they answer:
they are the consequence of its action, not something the policy wrote.

What a reward sees of the final state: `Trajectory.final_answer` (the last assistant message's
text) and, when the trainer passes it, the environment's state in ``fields["environment_state"]``
(`ENVIRONMENT_STATE_FIELD`; the TRL adapter puts a JSON view of each rollout's environment there).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardlab.errors import InvalidInput
from rewardlab.rewards.contract import Sample, Score, Status, Text, message_text
from rewardlab.rewards.tool_calls.calls import MalformedCall, ToolCall, call_from_mapping

#: The `Sample.fields` key holding a JSON view of the rollout's environment after it ended.
ENVIRONMENT_STATE_FIELD = "environment_state"
#: Roles a trajectory's messages may have; a ``system`` or unknown role in a completion is an error.
ROLES = ("assistant", "tool", "user")


@dataclass(frozen=True, slots=True)
class Observation:
    """A message that answers a turn: a tool's result (``role: tool``) or a user's reply."""

    role: str
    content: str
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """One assistant message and what answered it.

    Attributes:
        index: The turn's position among the assistant turns, from 0.
        content: The message's text ("" for a message that only calls tools).
        tool_calls: The calls it made, in order (`ToolCall`s, as the ``tool_call`` reward reads
            them, each with ``where`` it was read).
        observations: The tool results and user messages that followed it, before the next
            assistant message.
    """

    index: int
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    observations: tuple[Observation, ...] = ()


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A completion read as turns; see the module docstring."""

    turns: tuple[Turn, ...]

    @property
    def final_answer(self) -> str:
        """The last assistant message's text: what the agent finally said."""
        return self.turns[-1].content

    @property
    def tool_calls(self) -> list[ToolCall]:
        """Every call of the trajectory, in order."""
        return [call for turn in self.turns for call in turn.tool_calls]


def read_trajectory(completion: Text, field: str = "completion") -> Trajectory:
    """``completion`` as turns (see the module docstring); `InvalidInput` names the message and
    key at fault. A string is one turn; a message list needs at least one assistant message, and
    no tool result may come before the first."""
    if isinstance(completion, str):
        return Trajectory((Turn(0, completion),))
    if not isinstance(completion, Sequence):
        raise InvalidInput(field, f"must be text or a list of chat messages, got {type(completion).__name__}")
    turns: list[Turn] = []
    # The turn being read.
    content, calls, observations = "", tuple[ToolCall, ...](), list[Observation]()
    for position, message in enumerate(completion):
        where = f"{field}[{position}]"
        if not isinstance(message, Mapping):
            raise InvalidInput(where, f"must be a chat message (a mapping), got {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            raise InvalidInput(f"{where}.role", f"must be one of {', '.join(ROLES)}, got {role!r}")
        text = message_text([message], roles=(), field_name=where)
        if role == "assistant":
            if position > 0:
                turns.append(Turn(len(turns), content, calls, tuple(observations)))
            content, calls, observations = text, _tool_calls(message, where), []
        elif position == 0:
            raise InvalidInput(where, f"a {role} message before any assistant message answers nothing")
        else:
            name = message.get("name")
            if name is not None and not isinstance(name, str):
                raise InvalidInput(f"{where}.name", f"must be text, got {type(name).__name__}")
            observations.append(Observation(role, text, name))
    if not completion:
        raise InvalidInput(field, "has no assistant message")
    turns.append(Turn(len(turns), content, calls, tuple(observations)))
    return Trajectory(tuple(turns))


def read_trajectories(
    samples: Sequence[Sample], *, with_prompt: bool = False
) -> tuple[list[Score | None], list[tuple[int, Trajectory]]]:
    """Each sample's completion read as a trajectory, for rewards that score a batch of them.

    A sample whose completion is no trajectory gets its ``invalid_input`` score at once, naming
    the sample and the message at fault, and the rest of the batch is still scored; with
    ``with_prompt``, so does one whose prompt cannot be shown as the history before a turn
    (`history_text`). One reader for ``final_answer``, ``per_turn`` and ``turn_judge``, so that
    they refuse the same samples with the same reasons.

    Returns:
        One entry per sample: its failure, or None where the trajectory was read (the caller
        fills those in); and the (position, trajectory) of every sample that was read, in order.
    """
    scores: list[Score | None] = [None] * len(samples)
    readable: list[tuple[int, Trajectory]] = []
    for index, sample in enumerate(samples):
        try:
            trajectory = read_trajectory(sample.completion)
            if with_prompt:
                history_text(sample.prompt, ())
        except InvalidInput as error:
            scores[index] = Score.failure(Status.INVALID_INPUT, f"{sample.label(index)}: {error}")
            continue
        readable.append((index, trajectory))
    return scores, readable


def _tool_calls(message: Mapping[str, Any], where: str) -> tuple[ToolCall, ...]:
    given = message.get("tool_calls")
    if given is None:
        return ()
    if not isinstance(given, Sequence) or isinstance(given, str):
        raise InvalidInput(f"{where}.tool_calls", f"must be a list of calls, got {type(given).__name__}")
    calls = []
    for number, call in enumerate(given):
        # The tool-call reward's reader: OpenAI/TRL nesting under "function" or flat, arguments
        # as a mapping or its JSON text (OpenAI's), "parameters" for Llama 3.1.
        try:
            calls.append(call_from_mapping(call, f"{where}.tool_calls[{number}]"))
        except MalformedCall as error:
            raise InvalidInput(error.where, str(error).removeprefix(f"{error.where}: ")) from None
    return tuple(calls)


def turn_text(turn: Turn, *, observations: bool = True) -> str:
    """A turn as a judge reads it: its text, then each call as ``Tool call: name({json args})``,
    then (with ``observations``) each result as ``Tool result (name): ...`` or ``User: ...``."""
    lines = [turn.content.strip()] if turn.content.strip() else []
    lines += [
        f"Tool call: {call.name}({json.dumps(dict(call.arguments), sort_keys=True, default=str)})"
        for call in turn.tool_calls
    ]
    if observations:
        for observation in turn.observations:
            head = "User" if observation.role == "user" else f"Tool result ({observation.name or 'tool'})"
            lines.append(f"{head}: {observation.content}")
    return "\n".join(lines)


def history_text(prompt: Text, turns: Sequence[Turn]) -> str:
    """The prompt and the given turns as one transcript (what came before a judged turn)."""
    parts = [message_text(prompt, roles=(), field_name="prompt")]
    parts += [f"Assistant turn {turn.index + 1}:\n{turn_text(turn)}" for turn in turns]
    return "\n\n".join(part for part in parts if part.strip())

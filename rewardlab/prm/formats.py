"""How each family of discriminative PRM wants its input, and where it puts its step scores.

A PRM is trained on one exact layout: the problem, then the steps with a marker after each, and
a score read at each marker. Feeding it another layout gives numbers that mean nothing, so each
family's layout is reproduced here as its authors' inference code builds it:

- ``qwen_prm`` (Qwen2.5-Math-PRM): a chat (system prompt, the question as the user turn, the
  steps as the assistant turn, each followed by ``<extra_0>``); the score is the probability of
  class 1 at each ``<extra_0>`` token.
- ``math_shepherd`` (Math-Shepherd): ``"{question} {step 1} ки\\n{step 2} ки\\n..."`` through a
  causal LM; the score at each ``ки`` tag is ``P('+')`` against ``P('-')``.
- ``skywork`` (Skywork-o1-Open-PRM): BOS, the problem and a newline, then each step followed by a
  newline token; a value head's sigmoid at each step's newline.
- ``token_classification`` (TRL's ``PRMTrainer``): BOS, the prompt, then each step followed by the
  separator (``\\n``); the probability of class 1 at each step's last token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rewardlab.errors import FormatError

Family = Literal["qwen_prm", "math_shepherd", "skywork", "token_classification"]
FAMILIES: tuple[str, ...] = ("qwen_prm", "math_shepherd", "skywork", "token_classification")
QWEN_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."


@dataclass(frozen=True, slots=True)
class PRMInput:
    """Token ids for the model, and the position whose output scores each step."""

    input_ids: list[int]
    positions: list[int]


@dataclass(frozen=True, slots=True)
class PRMFormat:
    """One family's layout (see the module docstring).

    Attributes:
        family: Which family.
        marker: The step marker (``<extra_0>``, ``ки``, the step token, or the separator).
        good, bad: Math-Shepherd's verdict tokens.
        system: Qwen's system prompt.
    """

    family: Family
    marker: str
    good: str = "+"
    bad: str = "-"
    system: str = QWEN_SYSTEM

    @classmethod
    def named(cls, family: str, marker: str | None = None) -> PRMFormat:
        defaults = {
            "qwen_prm": "<extra_0>",
            "math_shepherd": "ки",
            "skywork": "\n",
            "token_classification": "\n",
        }
        if family not in defaults:
            raise ValueError(f"unknown PRM family {family!r}; one of {', '.join(FAMILIES)}")
        return cls(family, marker if marker is not None else defaults[family])  # type: ignore[arg-type]

    def build(self, question: str, steps: Sequence[str], tokenizer: Any) -> PRMInput:
        """The model's input for ``question`` and ``steps``."""
        if self.family == "qwen_prm":
            return self._qwen(question, steps, tokenizer)
        if self.family == "math_shepherd":
            return self._math_shepherd(question, steps, tokenizer)
        return self._marked_steps(question, steps, tokenizer)

    def _qwen(self, question: str, steps: Sequence[str], tokenizer: Any) -> PRMInput:
        marker = single_token(tokenizer, self.marker)
        messages = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": question},
            {"role": "assistant", "content": self.marker.join(steps) + self.marker},
        ]
        if not getattr(tokenizer, "chat_template", None):
            raise FormatError("qwen_prm needs a tokenizer with a chat template")
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return _at_marker(ids, marker, len(steps))

    def _math_shepherd(self, question: str, steps: Sequence[str], tokenizer: Any) -> PRMInput:
        marker = tokenizer.encode(self.marker)[-1]  # as the authors find the tag: its last token
        single_token(tokenizer, self.good), single_token(tokenizer, self.bad)
        text = f"{question} " + "".join(f"{step} {self.marker}\n" for step in steps)
        return _at_marker(tokenizer.encode(text), marker, len(steps))

    def _marked_steps(self, question: str, steps: Sequence[str], tokenizer: Any) -> PRMInput:
        separator = tokenizer.encode(self.marker, add_special_tokens=False)
        if not separator:
            raise FormatError(f"the step marker {self.marker!r} has no tokens")
        if self.family == "skywork":
            separator = separator[-1:]  # Skywork appends the step token's last id
            head = tokenizer.encode((tokenizer.bos_token or "") + question + "\n", add_special_tokens=False)
        else:
            bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
            head = bos + tokenizer.encode(question, add_special_tokens=False)
        ids, positions = list(head), []
        for step in steps:
            ids += tokenizer.encode(step, add_special_tokens=False) + separator
            positions.append(len(ids) - 1)
        return PRMInput(ids, positions)

    def scores(self, outputs: Any, positions: Sequence[int], tokenizer: Any) -> list[float]:
        """Each step's score from one sequence's model outputs (logits, or values)."""
        import torch

        picked = outputs[list(positions)].float()
        if self.family == "skywork":
            return torch.sigmoid(picked.squeeze(-1)).tolist()
        if self.family == "math_shepherd":
            candidates = [single_token(tokenizer, self.good), single_token(tokenizer, self.bad)]
            return torch.softmax(picked[:, candidates], dim=-1)[:, 0].tolist()
        return torch.softmax(picked, dim=-1)[:, 1].tolist()


def single_token(tokenizer: Any, text: str) -> int:
    """The id of ``text`` as one token; a `FormatError` if the tokenizer splits it."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise FormatError(f"{text!r} must be one token for this PRM's layout; the tokenizer makes {len(ids)}")
    return ids[0]


def _at_marker(ids: list[int], marker: int, steps: int) -> PRMInput:
    positions = [i for i, token in enumerate(ids) if token == marker]
    if len(positions) != steps:
        raise FormatError(
            f"found {len(positions)} step markers for {steps} steps (a step's own text contains the "
            "marker, or the tokenizer merges it with its neighbours)"
        )
    return PRMInput(ids, positions)

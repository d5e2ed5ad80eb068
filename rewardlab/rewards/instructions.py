"""IFEval / IFBench instruction constraints as a reward, on the checkers of the `if-verifiable` package.

if-verifiable carries the reference checkers of both benchmarks. Used as a training reward, four of
its behaviours would turn data problems or machine differences into silent wrong scores, so this
module works around them:

1. It skips instruction ids it does not know, so a typo scores as if the constraint were absent.
   Here an unknown id makes the sample ``invalid_input``.
2. Its checkers draw *random* arguments for any that a row leaves out (the same code generates new
   prompts), so a row without ``num_words`` is checked against a random word count. Here a missing
   argument makes the sample ``invalid_input``.
3. Sentence and word counting load NLTK's downloaded Punkt model, and importing its IFBench checkers
   tries to download NLTK data. `_make_if_verifiable_offline` replaces the Punkt model with a
   parameter-only Punkt tokenizer that needs no data, the same on every machine, and suppresses
   the download. IFBench checkers that need other NLTK data (stop words, a part-of-speech tagger)
   still need it installed; without it those samples get status ``error`` naming the resource.
4. langdetect is random unless seeded; it is seeded once here.
5. Five of its checkers take quadratic time on some responses (16 s on 40 kB of ``[``); they are
   replaced by linear versions with the same results (`rewardlab.rewards.instruction_checkers`).
"""

from __future__ import annotations

import functools
import math
import random
import re
import types
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import langdetect
import nltk
from if_verifiable.common import get_loose_transformations, strip_thinking
from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

from rewardlab.errors import InvalidInput, MissingDependency
from rewardlab.rewards.answer_region import AnswerRegion
from rewardlab.rewards.contract import Sample, Score
from rewardlab.rewards.instruction_checkers import install as install_linear_checkers
from rewardlab.rewards.options import RuleOptions, takes_options
from rewardlab.rewards.rule import RuleReward
from rewardlab.rewards.sample_workers import DEFAULT_SAMPLE_BUDGET_S
from rewardlab.rewards.visible_text import as_seen

# Abbreviations after which a period does not end a sentence (Punkt stores them lowercased, without
# the final period). NLTK's trained English model knows more; these cover the ones common in answers.
_ENGLISH_ABBREVIATIONS = frozenset(
    {
        "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "rev", "hon", "gen", "col", "lt",
        "sgt", "capt", "gov", "sen", "rep", "vs", "etc", "e.g", "i.e", "cf", "al", "approx", "dept",
        "est", "fig", "vol", "inc", "ltd", "co", "corp", "u.s", "u.k", "a.m", "p.m", "ph.d",
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    }
)  # fmt: skip


def _offline_sentence_tokenizer() -> PunktSentenceTokenizer:
    parameters = PunktParameters()
    parameters.abbrev_types = set(_ENGLISH_ABBREVIATIONS)
    return PunktSentenceTokenizer(parameters)


_SENTENCE_TOKENIZER = _offline_sentence_tokenizer()
_WORD_TOKENIZER = nltk.tokenize.NLTKWordTokenizer()


def _offline_word_tokenize(text: str, language: str = "english", preserve_line: bool = False) -> list[str]:
    """`nltk.word_tokenize`, with the offline sentence tokenizer in place of the downloaded model."""
    sentences = [text] if preserve_line else _SENTENCE_TOKENIZER.tokenize(text)
    return [token for sentence in sentences for token in _WORD_TOKENIZER.tokenize(sentence)]


def _skip_download(*args: Any, **kwargs: Any) -> bool:
    return False


def _make_if_verifiable_offline() -> dict[str, Mapping[str, type]]:
    """Import if-verifiable's checker registries, patched to run offline and deterministically.

    - Importing ``if_verifiable.ifbench`` calls ``nltk.download`` for four resources: on a training
      node without network that can hang on connection timeouts, and with network it writes to the
      home directory. ``nltk.download`` is a no-op while it is imported.
    - Both ``instructions_util`` modules count sentences with ``_get_sentence_tokenizer()``, which
      loads the downloaded Punkt model; it is replaced by `_offline_sentence_tokenizer`'s.
    - Their checkers call ``nltk.word_tokenize``, which loads the same model to split sentences
      first; the modules' ``nltk`` name is pointed at a stand-in module that forwards everything to
      nltk except ``word_tokenize``, which uses the offline tokenizer. The ``nltk`` package itself
      is left untouched for everyone else.
    - ``langdetect.DetectorFactory.seed = 0``: langdetect samples features at random, so the
      response-language checks could flip between calls on short or mixed texts.

    Returns the instruction registries by benchmark name.
    """
    real_download = nltk.download
    nltk.download = _skip_download
    try:
        from if_verifiable.ifbench import instructions as ifbench_instructions
        from if_verifiable.ifbench import instructions_registry as ifbench_registry
        from if_verifiable.ifbench import instructions_util as ifbench_util
    finally:
        nltk.download = real_download
    from if_verifiable.ifeval import instructions as ifeval_instructions
    from if_verifiable.ifeval import instructions_registry as ifeval_registry
    from if_verifiable.ifeval import instructions_util as ifeval_util

    install_linear_checkers(ifeval_instructions, ifbench_instructions)

    offline_nltk = types.ModuleType("nltk", "nltk with a word_tokenize that needs no downloaded data")
    # everything but word_tokenize is nltk's own
    vars(offline_nltk).update(
        __getattr__=functools.partial(getattr, nltk), word_tokenize=_offline_word_tokenize
    )
    for module in (ifeval_util, ifbench_util, ifbench_instructions):
        module.nltk = offline_nltk
    for module in (ifeval_util, ifbench_util):
        module._get_sentence_tokenizer = lambda: _SENTENCE_TOKENIZER
    langdetect.DetectorFactory.seed = 0
    return {"ifeval": ifeval_registry.INSTRUCTION_DICT, "ifbench": ifbench_registry.INSTRUCTION_DICT}


_REGISTRIES = _make_if_verifiable_offline()


def _missing_nltk_resource(error: LookupError) -> str:
    found = re.search(r"nltk\.download\('([^']+)'\)", str(error))
    return found.group(1) if found else "(unnamed resource)"


def _given_arguments(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a row sets: IFEval rows carry every argument name, unused ones as None (and as
    NaN once they have been through a pandas numeric column)."""
    return {
        key: value
        for key, value in raw.items()
        if value is not None and not (isinstance(value, float) and math.isnan(value))
    }


def _randomly_replaced(checker: Any, given: dict[str, Any]) -> list[str]:
    """The arguments if-verifiable would replace with random draws: IFEval's ``build_description``
    draws ``random.randint`` for a value that is missing or below zero ("unset"), so a row saying
    "at least -5 words" would be checked against a count nobody wrote, a new one on every check.
    Built under two seeds (the process's random state is left as it was), an argument that comes
    out different was drawn. Arguments the checker refuses raise its TypeError or ValueError."""
    state = random.getstate()
    built = []
    try:
        for seed in (0, 1):
            random.seed(seed)
            checker.build_description(**given)
            built.append(dict(checker.get_instruction_args() or {}))
    finally:
        random.setstate(state)
    first, second = built
    return sorted(name for name in first.keys() | second.keys() if first.get(name) != second.get(name))


class InstructionFollowingOptions(RuleOptions):
    """Options of `InstructionFollowingReward`."""

    benchmark: Literal["ifeval", "ifbench"] = "ifeval"
    """``ifeval``: Google's 25 IFEval constraints; ``ifbench``: AllenAI's 58 out-of-distribution
    constraints."""
    mode: Literal["strict", "loose"] = "strict"
    """``strict`` checks the response as it is. ``loose`` also accepts it when some variant passes:
    without the first line, the last line, both, or markdown asterisks, as the benchmarks' loose
    accuracy does."""
    aggregate: Literal["fraction", "all_or_nothing"] = "fraction"
    """``fraction``: the fraction of constraints met (the benchmarks' instruction-level accuracy),
    a denser signal for training. ``all_or_nothing``: 1.0 only when every constraint is met
    (prompt-level accuracy)."""
    ids_field: str = "instruction_id_list"
    """`Sample.fields` key of the instruction id list."""
    kwargs_field: str = "kwargs"
    """`Sample.fields` key of the argument list, one mapping per instruction. Argument names a
    checker does not use may be present with value None, as in the Hugging Face IFEval rows. A
    missing field means no instruction takes arguments."""


@takes_options(InstructionFollowingOptions)
class InstructionFollowingReward(RuleReward):
    """The share of a row's IFEval or IFBench constraints that the completion satisfies.

    Each dataset row lists instruction ids (``"punctuation:no_comma"``,
    ``"length_constraints:number_words"``, ...) and, in the same order, the arguments of each; the
    reward checks the response against each with if-verifiable's reference checker. The response is
    the completion's answer region: reasoning blocks are removed (if-verifiable itself only drops
    text up to the first ``</think>``), but an answer block does not narrow it (the instructions
    constrain the whole response), and a completion with no response outside reasoning (empty,
    or a reasoning block that never closes) scores 0.0. Characters are read as what they look like
    (`rewardlab.rewards.visible_text`: invisible ones dropped, a full-width ``，`` or an Arabic ``،`` is
    a comma, a Cyrillic ``е`` inside an English word is an ``e``).

    Options: `InstructionFollowingOptions` (which benchmark's checkers, strict or loose, how the
    constraints fold, the fields that list them), and where the answer is read and how checks run
    (`RuleOptions`).

    ``breakdown`` maps each instruction id to 1.0 or 0.0 (a repeated id gets ``#2``, ``#3``...);
    ``details["failed"]`` lists the ids not met. A sample with an unknown id, a missing or invalid
    argument, or mismatched lists is ``invalid_input``.

    Example:
        >>> from rewardlab import Sample
        >>> reward = InstructionFollowingReward()
        >>> sample = Sample(
        ...     completion="Hello world, twice.",
        ...     fields={
        ...         "instruction_id_list": ["punctuation:no_comma", "length_constraints:number_words"],
        ...         "kwargs": [{}, {"num_words": 5, "relation": "less than"}],
        ...     },
        ... )
        >>> score = reward.score([sample])[0]
        >>> score.value, score.details["failed"]
        (0.5, ['punctuation:no_comma'])
    """

    name = "instruction_following"

    def __init__(
        self,
        *,
        benchmark: Literal["ifeval", "ifbench"] = "ifeval",
        mode: Literal["strict", "loose"] = "strict",
        aggregate: Literal["fraction", "all_or_nothing"] = "fraction",
        ids_field: str = "instruction_id_list",
        kwargs_field: str = "kwargs",
        answer_region: Any = None,
        execution: Literal["worker", "inline"] = "worker",
        sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S,
        name: str | None = None,
    ):
        if answer_region is None:
            # The whole response is what the instructions constrain: an answer block does not
            # narrow it (a compliant stub in <answer> tags must not stand for the response).
            answer_region = AnswerRegion(answers=())
        self.configure_rule(answer_region=answer_region, execution=execution, sample_budget_s=sample_budget_s)
        self.benchmark = benchmark
        self.mode = mode
        self.aggregate = aggregate
        self.ids_field = ids_field
        self.kwargs_field = kwargs_field
        if name is not None:
            self.name = name
        self._registry = _REGISTRIES[benchmark]

    def check(self, sample: Sample) -> Score:
        instruction_ids = self._instruction_ids(sample)
        arguments = [
            self._checked_arguments(instruction_id, raw)
            for instruction_id, raw in zip(
                instruction_ids, self._raw_arguments(sample, len(instruction_ids)), strict=True
            )
        ]
        keys = _breakdown_keys(instruction_ids)
        details: dict[str, Any] = {"benchmark": self.benchmark, "mode": self.mode}
        region = self.answer(sample)
        # Characters are read as what they look like: a full-width comma, an Arabic comma and a
        # low quotation mark are commas, a Cyrillic е inside an English word is an e.
        completion = as_seen(region.text or "")
        if not completion.strip():
            details["failed"] = list(instruction_ids)
            reason = region.reason or (
                "empty response" if not sample.completion_text.strip() else "no response outside reasoning"
            )
            return Score(0.0, breakdown=dict.fromkeys(keys, 0.0), reason=reason, details=details)

        passed = [
            self._passes(instruction_id, kwargs, completion, sample.prompt_text)
            for instruction_id, kwargs in zip(instruction_ids, arguments, strict=True)
        ]
        failed = [
            instruction_id for instruction_id, ok in zip(instruction_ids, passed, strict=True) if not ok
        ]
        value = sum(passed) / len(passed) if self.aggregate == "fraction" else float(not failed)
        details["failed"] = failed
        return Score(
            value,
            breakdown={key: float(ok) for key, ok in zip(keys, passed, strict=True)},
            reason=f"not met: {', '.join(failed)}" if failed else None,
            details=details,
        )

    def _instruction_ids(self, sample: Sample) -> list[str]:
        key = f"fields.{self.ids_field}"
        if self.ids_field not in sample.fields:
            raise InvalidInput(key, "missing; it lists the instruction ids to check")
        ids = sample.fields[self.ids_field]
        if isinstance(ids, str) or not isinstance(ids, Sequence) or not all(isinstance(i, str) for i in ids):
            raise InvalidInput(key, f"must be a list of instruction id strings, got {ids!r}")
        if not ids:
            raise InvalidInput(key, "is empty: there is nothing to check")
        return list(ids)

    def _raw_arguments(self, sample: Sample, count: int) -> list[Mapping[str, Any]]:
        key = f"fields.{self.kwargs_field}"
        if self.kwargs_field not in sample.fields:
            return [{}] * count
        listed = sample.fields[self.kwargs_field]
        if isinstance(listed, str) or not isinstance(listed, Sequence):
            raise InvalidInput(
                key, f"must be a list with one mapping per instruction, got {type(listed).__name__}"
            )
        if len(listed) != count:
            raise InvalidInput(key, f"has {len(listed)} entries for {count} instruction ids")
        if not all(entry is None or isinstance(entry, Mapping) for entry in listed):
            raise InvalidInput(key, "every entry must be a mapping of argument names to values")
        return [entry or {} for entry in listed]

    def _checked_arguments(self, instruction_id: str, raw: Mapping[str, Any]) -> dict[str, Any]:
        """The row's arguments for one instruction, refused when if-verifiable would guess or fail."""
        checker_class = self._registry.get(instruction_id)
        if checker_class is None:
            raise InvalidInput(
                f"fields.{self.ids_field}", f"unknown {self.benchmark} instruction id {instruction_id!r}"
            )
        given = _given_arguments(raw)
        checker = checker_class(instruction_id)
        missing = [name for name in checker.get_instruction_args_keys() if name not in given]
        if missing:
            raise InvalidInput(
                f"fields.{self.kwargs_field}",
                f"{instruction_id} needs {', '.join(missing)}; if-verifiable would pick random values",
            )
        try:
            drawn = _randomly_replaced(checker, given)
        except (TypeError, ValueError) as error:
            raise InvalidInput(f"fields.{self.kwargs_field}", f"{instruction_id}: {error}") from None
        if drawn:
            raise InvalidInput(
                f"fields.{self.kwargs_field}",
                f"{instruction_id}: {', '.join(f'{name}={given.get(name)!r}' for name in drawn)} "
                "is not a usable value; if-verifiable would pick a random one",
            )
        return given

    def _passes(self, instruction_id: str, kwargs: dict[str, Any], completion: str, prompt: str) -> bool:
        """if-verifiable's ``evaluate_instructions`` for one instruction, reading only the mode's
        texts: strict checks the response, loose each of its variants (first or last line
        dropped, asterisks removed) until one passes. The reference checks both modes, and the
        variants that equal the response or each other again; a sentence count tokenizes the
        whole text each time, so that was nine passes over a long completion instead of one."""
        try:
            checker = self._registry[instruction_id](instruction_id)
            checker.build_description(**kwargs)
            if "prompt" in (checker.get_instruction_args() or {}):
                checker.build_description(prompt=prompt)
            response = strip_thinking(completion)
            texts = (
                [response]
                if self.mode == "strict"
                else list(dict.fromkeys(get_loose_transformations(response)))
            )
            return any(text.strip() and checker.check_following(text) for text in texts)
        except LookupError as error:
            resource = _missing_nltk_resource(error)
            raise MissingDependency(
                f"{instruction_id} needs NLTK data {resource!r}, which is not installed "
                f"(python -m nltk.downloader {resource})"
            ) from None


def _breakdown_keys(instruction_ids: Sequence[str]) -> list[str]:
    seen: Counter[str] = Counter()
    keys = []
    for instruction_id in instruction_ids:
        seen[instruction_id] += 1
        keys.append(
            instruction_id if seen[instruction_id] == 1 else f"{instruction_id}#{seen[instruction_id]}"
        )
    return keys

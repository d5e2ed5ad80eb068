"""`ToolCallReward`: whether a completion makes the reference's function calls.

Peers, and what rewardlab takes from each: BFCL's AST checker (ShishirPatil/gorilla,
``bfcl_eval/eval_checker/ast_eval/ast_checker.py``) for comparing one call and for its
categories - ``simple``, ``multiple`` (one call chosen among several tools), ``parallel`` (several
calls, any order), ``parallel_multiple`` and ``irrelevance`` (no call is right); BFCL's multi-turn
ground truth (one list of calls per step) for ordered multi-step sequences. Peers score coarser:
verifiers' ``tool-test`` environment (willccbb/verifiers) by the set of tool names called;
OpenJudge's ``ToolCallSequenceMatchGrader`` (modelscope/OpenJudge,
``openjudge/graders/agent/tool/tool_call_sequence_match.py``) by name per step and the F1 of
arguments' keys and values as strings (``1`` is ``"1"``; arguments that are not JSON become
``{}``). Here values follow BFCL's type rules and accepted alternatives (see
`rewardlab.rewards.tool_calls.matching`).

A call that cannot be read (JSON that does not parse, a call without a name) is not the model
being wrong in a way rewardlab can measure: by default the sample gets status ``parse_error``
naming the field; ``malformed_calls: wrong`` scores it 0.0 instead, for training runs that want
to punish unreadable calls.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import Field, model_validator

from rewardlab.errors import InvalidInput
from rewardlab.rewards.contract import Sample, Score, Status
from rewardlab.rewards.options import OptionError, RuleOptions, takes_options
from rewardlab.rewards.process_pool import preload_in_workers
from rewardlab.rewards.rule import RuleReward, check_one
from rewardlab.rewards.sample_workers import DEFAULT_SAMPLE_BUDGET_S, run_per_sample
from rewardlab.rewards.tool_calls.calls import ExpectedCall, MalformedCall, ToolCall
from rewardlab.rewards.tool_calls.matching import StringRule, call_problem, pair_calls
from rewardlab.rewards.tool_calls.reading import CALL_REGION, CallReader, TextFormat, template_format
from rewardlab.rewards.tool_calls.reference import expected_steps, tool_schemas


class ToolCallOptions(RuleOptions):
    """Options of `ToolCallReward`."""

    call_format: TextFormat = "auto"
    """How calls written as text are read: ``auto`` (Hermes ``<tool_call>``, Mistral
    ``[TOOL_CALLS]``, Llama ``<|python_tag|>`` or Harmony ``to=functions.``, whichever marker comes
    first), one of ``hermes``, ``llama3``, ``mistral``, ``harmony``, ``pythonic``, or ``template``
    (the format the chat template of ``tokenizer`` defines). OpenAI-style ``tool_calls`` of chat
    messages are always read."""
    tokenizer: str | None = None
    """A local tokenizer folder, for ``call_format: template`` (never fetched from the hub)."""
    reference_field: str | None = None
    """Read the reference calls from ``sample.fields[reference_field]`` (a list, or its JSON
    text) instead of ``sample.reference``."""
    tools_field: str = "tools"
    """Where a sample's tool definitions are, when it has them (OpenAI's or BFCL's form): their
    declared parameter types and required parameters then count, and a sample that offers several
    tools for one call is in the ``multiple`` category."""
    order: Literal["any", "strict"] = "any"
    """``any``: the calls of one step match in any order (BFCL's parallel categories). ``strict``:
    the n-th call must match the n-th reference call."""
    partial_credit: bool = False
    """False: 1.0 when every reference call is made and nothing else, else 0.0 (BFCL's accuracy).
    True: the matched calls over the larger of the reference's and the completion's call counts,
    so a missing call and an extra call each cost."""
    strings: StringRule = "bfcl"
    """``bfcl``: strings compare after BFCL's ``standardize_string`` (case, spaces and ``,./-_*^``
    ignored). ``exact``: as written."""
    underscore_dots: bool = False
    """Read a ``.`` in reference and tool names as ``_`` (``math.hypot`` is ``math_hypot``), as
    BFCL's ``convert_func_name`` does for models whose API refuses dots in function names
    (OpenAI, Mistral, Gemini)."""
    malformed_calls: Literal["parse_error", "wrong"] = "parse_error"
    """A call that cannot be read: status ``parse_error`` naming the field (default), or
    ``wrong``: 0.0 with the same reason."""
    max_calls: int = Field(default=64, ge=1)
    """A completion with more calls than this scores 0.0 unmatched (matching costs calls times
    reference calls)."""

    @model_validator(mode="after")
    def _template_needs_tokenizer(self) -> ToolCallOptions:
        if self.call_format == "template" and self.tokenizer is None:
            raise OptionError("tokenizer", "call_format 'template' needs a local tokenizer folder")
        if self.tokenizer is not None and self.call_format != "template":
            raise OptionError("tokenizer", "only read with call_format 'template'")
        return self


def category(expected: list[list[ExpectedCall]], stepped: bool, tool_count: int) -> str:
    """The BFCL category of a reference: ``irrelevance``, ``simple``, ``multiple``, ``parallel``,
    ``parallel_multiple``, or ``multi_step`` for a reference of several steps."""
    calls = [call for step in expected for call in step]
    if not calls:
        return "irrelevance"
    if stepped and len(expected) > 1:
        return "multi_step"
    if len(calls) == 1:
        return "multiple" if tool_count > 1 else "simple"
    return "parallel" if len({call.name for call in calls}) == 1 else "parallel_multiple"


def problems_of(
    got: list[ToolCall],
    wanted: list[ExpectedCall],
    schemas: Mapping[str, Mapping[str, Any]],
    strings: StringRule,
) -> Callable[[int, int], str | None]:
    """``problem(c, e)``: why call ``c`` is not reference call ``e`` (None when it is), each pair
    compared once (the matching and the reasons ask again)."""

    @functools.cache
    def problem(c: int, e: int) -> str | None:
        return call_problem(got[c], wanted[e], schemas, strings)

    return problem


def labelled_check(reward: ToolCallReward, item: tuple[int, Sample]) -> Score:
    """`check_one`, with the sample named in the reason of a call that could not be read (its
    position in the batch is known only here)."""
    index, sample = item
    score = check_one(reward, item)
    if "parse_error" in score.details:
        score.reason = f"{sample.label(index)}: {score.reason}"
    return score


@takes_options(ToolCallOptions)
class ToolCallReward(RuleReward):
    """1.0 when the completion makes the reference's function calls, else 0.0 (or partial credit).

    Options: `ToolCallOptions` (how calls are read, where the reference is, order, partial
    credit, string comparison), and how checks run (`RuleOptions`; the default answer region
    leaves out reasoning only).

    ``details`` lists every reference call (``calls``: its name, the call it matched or why none
    did) and every call no reference call took (``unexpected_calls``); ``breakdown`` has 1.0 or
    0.0 per reference call (``call_1``, ..., or ``step_1.call_1`` for a multi-step reference).

    Example:
        >>> from rewardlab import Sample
        >>> reward = ToolCallReward(execution="inline")
        >>> reference = '[{"get_weather": {"city": ["Paris"], "unit": ["", "celsius"]}}]'
        >>> text = '<tool_call>{"name": "get_weather", "arguments": {"city": "paris"}}</tool_call>'
        >>> reward.score([Sample(completion=text, reference=reference)])[0].value
        1.0
    """

    name = "tool_call"

    def __init__(
        self,
        *,
        call_format: TextFormat = "auto",
        tokenizer: str | None = None,
        reference_field: str | None = None,
        tools_field: str = "tools",
        order: Literal["any", "strict"] = "any",
        partial_credit: bool = False,
        strings: StringRule = "bfcl",
        underscore_dots: bool = False,
        malformed_calls: Literal["parse_error", "wrong"] = "parse_error",
        max_calls: int = 64,
        answer_region: Any = None,
        execution: Literal["worker", "inline"] = "worker",
        sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S,
        name: str | None = None,
    ):
        self.configure_rule(answer_region=answer_region, execution=execution, sample_budget_s=sample_budget_s)
        text_format, response_template = str(call_format), None
        if call_format == "template":
            assert tokenizer is not None  # the options require it
            text_format, response_template = template_format(tokenizer)
            if text_format == "response_template" and self.execution == "worker":
                # Its parser lives in transformers, seconds to import: not on a sample's budget.
                preload_in_workers("transformers.utils.chat_parsing")
        region = CALL_REGION if answer_region is None else self.answer_region
        self.reader = CallReader(text_format, response_template, region)
        self.reference_field = reference_field
        self.tools_field = tools_field
        self.order = order
        self.partial_credit = partial_credit
        self.strings = strings
        self.underscore_dots = underscore_dots
        self.malformed_calls = malformed_calls
        self.max_calls = max_calls
        if name is not None:
            self.name = name

    async def ascore(self, samples: Sequence[Sample]) -> list[Score]:
        return await run_per_sample(
            labelled_check, self, samples, execution=self.execution, budget_s=self.sample_budget_s
        )

    def check(self, sample: Sample) -> Score:
        expected, stepped = self._expected(sample)
        schemas = self._schemas(sample)
        kind = category(expected, stepped, len(schemas))
        try:
            made_steps, problem = self.reader.steps(sample.completion)
        except MalformedCall as error:
            reason = str(error)  # `labelled_check` names the sample
            unread = {"category": kind, "parse_error": error.where}
            if self.malformed_calls == "wrong":
                return Score(0.0, reason=reason, details=unread)
            return Score.failure(Status.PARSE_ERROR, reason, details=unread)
        made = sum(len(step) for step in made_steps)
        details: dict[str, Any] = {"category": kind, "calls_made": made}
        if problem is not None:
            return Score(0.0, reason=f"no calls read: {problem}", details=details)
        if made > self.max_calls:
            return Score(0.0, reason=f"{made} calls, over max_calls={self.max_calls}", details=details)
        if not stepped:
            made_steps = [[call for step in made_steps for call in step]]
        return self._scored(expected, made_steps, schemas, details)

    def _scored(
        self,
        expected: list[list[ExpectedCall]],
        made: list[list[ToolCall]],
        schemas: Mapping[str, Mapping[str, Any]],
        details: dict[str, Any],
    ) -> Score:
        results: list[dict[str, Any]] = []
        unexpected: list[dict[str, Any]] = []
        breakdown: dict[str, float] = {}
        several_steps = len(expected) > 1
        for s in range(max(len(expected), len(made))):
            wanted = expected[s] if s < len(expected) else []
            got = made[s] if s < len(made) else []
            problem = problems_of(got, wanted, schemas, self.strings)
            if self.order == "strict":
                paired = [e if e < len(got) and problem(e, e) is None else None for e in range(len(wanted))]
            else:
                paired = pair_calls(got, wanted, problem)
            taken = {c for c in paired if c is not None}
            for e, call in enumerate(wanted):
                key = f"step_{s + 1}.call_{e + 1}" if several_steps else f"call_{e + 1}"
                c = paired[e]
                breakdown[key] = 0.0 if c is None else 1.0
                result: dict[str, Any] = {"name": call.name, "matched": None if c is None else got[c].where}
                if several_steps:
                    result["step"] = s + 1
                if c is None:
                    result["reason"] = self._unmatched(e, got, wanted, taken, problem)
                results.append(result)
            unexpected += [
                {"name": got[c].name, "where": got[c].where} for c in range(len(got)) if c not in taken
            ]
        details.update(calls=results, unexpected_calls=unexpected)
        matched = sum(1 for r in results if r["matched"] is not None)
        failures = [f"{r['name']}: {r['reason']}" for r in results if r["matched"] is None]
        # A wrong call to an expected function is named in that function's reason already.
        named = {r["name"] for r in results if r["matched"] is None}
        failures += [
            f"unexpected call {u['name']!r} at {u['where']}" for u in unexpected if u["name"] not in named
        ]
        reason = "; ".join(failures[:3]) + (f"; and {len(failures) - 3} more" if len(failures) > 3 else "")
        if self.partial_credit:
            largest = max(len(results), matched + len(unexpected))
            value = 1.0 if largest == 0 else matched / largest
        else:
            value = 1.0 if matched == len(results) and not unexpected else 0.0
        return Score(value, breakdown=breakdown, reason=reason or None, details=details)

    def _unmatched(
        self, e: int, got: list[ToolCall], wanted: list[ExpectedCall], taken: set[int], problem: Any
    ) -> str:
        """Why reference call ``e`` was not matched: the first free call of its name and what is
        wrong with it, else why there is none."""
        if self.order == "strict":
            return "no call at this position" if e >= len(got) else problem(e, e)
        name = wanted[e].name
        same_name = [c for c in range(len(got)) if got[c].name == name]
        free = [c for c in same_name if c not in taken]
        if free:
            return f"{got[free[0]].where}: {problem(free[0], e)}"
        if same_name:
            return f"every call to {name!r} matched another reference call"
        return f"no call to {name!r}"

    def _expected(self, sample: Sample) -> tuple[list[list[ExpectedCall]], bool]:
        steps, stepped = self._reference_steps(sample)
        if self.underscore_dots:
            steps = [[ExpectedCall(c.name.replace(".", "_"), c.arguments) for c in step] for step in steps]
        return steps, stepped

    def _reference_steps(self, sample: Sample) -> tuple[list[list[ExpectedCall]], bool]:
        if self.reference_field is not None:
            where = f"fields.{self.reference_field}"
            if self.reference_field not in sample.fields:
                raise InvalidInput(where, "missing; it should hold the reference calls")
            return expected_steps(sample.fields[self.reference_field], where)
        if sample.reference is None:
            raise InvalidInput("reference", "tool_call needs the reference calls (JSON) in sample.reference")
        return expected_steps(sample.reference, "reference")

    def _schemas(self, sample: Sample) -> dict[str, Mapping[str, Any]]:
        tools = sample.fields.get(self.tools_field)
        schemas = {} if tools is None else tool_schemas(tools, f"fields.{self.tools_field}")
        if self.underscore_dots:
            return {name.replace(".", "_"): schema for name, schema in schemas.items()}
        return schemas

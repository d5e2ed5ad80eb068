"""JSON output checked against a JSON Schema: structured-output and tool-argument tasks.

Schemas come from configs and, per sample, from data, so two things jsonschema does by default
are turned off:

- Fetching ``$ref``s. Without a registry, jsonschema 4.18+ still retrieves any URI it cannot
  resolve - over HTTP, or ``file://`` from the disk - with a deprecation warning (the
  "Resolving References to Schemas" page of its docs). A fetched document would decide the
  reward, and a URL that never answers would hold the check for as long as the socket waits. Every
  validator here gets a `referencing.Registry` whose ``retrieve`` refuses (referencing's docs:
  ``retrieve`` is called for URIs the registry lacks and raises ``NoSuchResource`` when there is
  none); jsonschema combines it with the bundled metaschemas, so references inside the schema and
  to a metaschema still resolve, and any other one is unresolvable (the sample is
  ``invalid_input``).
- Backtracking regular expressions. ``pattern`` meets the completion's strings, and Python's
  ``re`` can take exponential time on them (``^(a+)+$`` against ``"aaaa...!"``) while holding the
  GIL. It is matched by RE2 (``google-re2``), in time linear in the string, which is also closer
  to the ECMA-262 semantics JSON Schema specifies (``$`` only at the end of the string, digits
  only ASCII). A pattern RE2 cannot run (lookaround, backreferences, possessive quantifiers)
  falls back to Python's ``re``, as do ``patternProperties``, whose regexes jsonschema also applies inside
  ``additionalProperties`` and ``unevaluatedProperties`` (they must agree there); those matches
  are bounded by the per-sample budget of the rule worker (``execution: worker``, the default).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Hashable, Iterator, Mapping
from decimal import Decimal
from typing import Any, Literal

import jsonschema
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
from jsonschema import TypeChecker, validators
from jsonschema.protocols import Validator
from pydantic import Field, model_validator
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from rewardlab.errors import InvalidInput
from rewardlab.rewards.contract import Sample, Score
from rewardlab.rewards.details import clipped
from rewardlab.rewards.fences import fenced_blocks
from rewardlab.rewards.markup import without_comments, without_hidden_html, without_unrendered
from rewardlab.rewards.math.commitment import retraction
from rewardlab.rewards.options import OptionError, RuleOptions, takes_options
from rewardlab.rewards.rule import RuleReward
from rewardlab.rewards.sample_workers import DEFAULT_SAMPLE_BUDGET_S

_FENCED_JSON = re.compile(r"```json[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
# Validation messages quote the offending instance, which can be the whole document.
_MESSAGE_CHARS = 300


def _clipped(message: str) -> str:
    return clipped(message, _MESSAGE_CHARS)


def _canonical(value: Any) -> Hashable:
    """A hashable form equal exactly when JSON Schema calls two values equal: ``true`` is not
    ``1``, ``1`` is ``1.0``, objects ignore key order, arrays keep it."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", int(value) if isinstance(value, float) and value.is_integer() else value)
    if isinstance(value, list):
        return ("array", tuple(_canonical(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _canonical(item)) for key, item in value.items()))
    return ("other", value)


def _unique_items(validator: Validator, unique: bool, instance: Any, schema: Mapping[str, Any]) -> Iterator:
    """``uniqueItems`` in linear time: jsonschema compares unhashable items pairwise, which took
    1.5 s on an array of 1,500 objects (a completion's JSON)."""
    if unique and validator.is_type(instance, "array"):
        seen: set[Hashable] = set()
        for item in instance:
            key = _canonical(item)
            if key in seen:
                yield jsonschema.ValidationError(
                    f"{clipped(repr(instance), _MESSAGE_CHARS)} has non-unique elements"
                )
                return
            seen.add(key)


def _refuse_retrieval(uri: str) -> Any:
    """A `Registry` ``retrieve`` that never fetches: every URI outside the schema is absent."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class mypy cannot read


#: The registry of every validator here: nothing but the schema itself and the metaschemas.
_NO_RETRIEVAL: Registry[Any] = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]  # attrs alias


@functools.lru_cache(maxsize=256)
def _compiled_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2, or by Python's ``re`` when RE2 cannot run it."""
    options = re2.Options()
    options.log_errors = False  # a refused pattern is expected, not worth a line on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error:
        return re.compile(pattern)


def _pattern(validator: Validator, pattern: str, instance: Any, schema: Mapping[str, Any]) -> Iterator:
    """``pattern`` in linear time where RE2 can run it (see the module docstring)."""
    if validator.is_type(instance, "string") and not _compiled_pattern(pattern).search(instance):
        shown, pattern_shown = clipped(repr(instance), _MESSAGE_CHARS), clipped(repr(pattern), _MESSAGE_CHARS)
        yield jsonschema.ValidationError(f"{shown} does not match {pattern_shown}")


def _refuse_constant(name: str) -> None:
    # Python's json reads NaN and Infinity, which JSON has not: NaN would pass any bound (every
    # comparison with it is false).
    raise ValueError(f"{name} is not JSON")


#: The words right before an output block that introduce it.
_LEAD_IN_CHARS = 200
_DISOWNS_OUTPUT = re.compile(
    r"\b(?:wrong|incorrect|invalid|do\s+not\s+use|don['’]t\s+use|placeholder|template|dummy|made[- ]up|fake"
    r"|not\s+(?:my|the|a)\s+(?:real\s+|actual\s+|final\s+)?(?:answer|output|result))\b",
    re.IGNORECASE,
)


def _disowning(text: str) -> str | None:
    """The words that disown an output around it ("The following JSON is wrong; do not use it:",
    "The above is only a placeholder template."), if any."""
    found = _DISOWNS_OUTPUT.search(text)
    return found.group() if found else None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Python's json keeps the last of two equal keys; another reader keeps the first. An object
    # whose meaning depends on the reader is not the JSON asked for.
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"duplicate key {key[:80]!r}")
        found[key] = value
    return found


def _loads(text: str) -> Any:
    # Decimals, not floats: "10.0000000000000000001" is over a maximum of 10, which a float (10.0)
    # would not be.
    return json.loads(
        text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys, parse_float=Decimal
    )


def _json_blocks(text: str) -> list[str]:
    """The fenced blocks that hold JSON, found as CommonMark finds them (a block nested in a
    longer fence is that block's text, not a block; one inside an HTML comment is not seen): those
    marked ``json``, and any other that holds a JSON object or array (a second output in a
    ```` ```javascript ```` block is still a second output). A text with no closed fence at all
    may close its block with backticks that end the last line (a form models write)."""
    visible = without_hidden_html(without_unrendered(without_comments(text))) if "<" in text else text
    fenced = fenced_blocks(visible)
    found = [
        block.body
        for block in fenced
        if block.info.split()[:1] in (["json"], ["JSON"], ["Json"]) or _holds_json(block.body)
    ]
    return found if found or fenced else _FENCED_JSON.findall(visible)


def _holds_json(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[") and _parses(text)


def _parses(text: str) -> bool:
    try:
        _loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _meaning(block: str) -> Hashable:
    """What a fenced block says: its JSON value, or its text when it is not JSON."""
    try:
        return _canonical(_loads(block))
    except (ValueError, RecursionError):
        return block.strip()


def load_validator(schema: Any, *, check_formats: bool) -> Validator:
    """A validator for ``schema`` (a mapping, a boolean schema, or its JSON text).

    The draft is the one the schema's ``$schema`` names, else Draft 2020-12. ``$ref``s outside the
    schema are never fetched, and ``pattern`` runs on RE2 (see the module docstring). Raises
    ValueError when the schema is not JSON or not a valid schema of its draft.
    """
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as error:
            raise ValueError(f"the schema is not JSON: {error}") from None
    if not isinstance(schema, Mapping | bool):
        raise ValueError(f"a schema is a JSON object or a boolean, got {type(schema).__name__}")
    validator_class = validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        # The stubs want a dict; a boolean is a valid schema too (``true`` accepts everything).
        validator_class.check_schema(schema)  # type: ignore[arg-type]
    except jsonschema.SchemaError as error:
        raise ValueError(f"invalid schema at {error.json_path}: {_clipped(error.message)}") from None
    format_checker = validator_class.FORMAT_CHECKER if check_formats else None
    linear = validators.extend(
        validator_class,
        {"uniqueItems": _unique_items, "pattern": _pattern},
        type_checker=_decimal_integers(validator_class.TYPE_CHECKER),
    )
    return linear(schema, format_checker=format_checker, registry=_NO_RETRIEVAL)


def _decimal_integers(checker: TypeChecker) -> TypeChecker:
    """``checker`` reading a number with a zero fractional part (``36.0``, parsed here as a
    `Decimal`) as an integer where the draft does (6 and later, as jsonschema's float check does;
    drafts 3 and 4 count only ``36``). jsonschema's own check knows floats, not decimals."""
    if not checker.is_type(1.0, "integer"):
        return checker

    def is_integer(_: TypeChecker, instance: Any) -> bool:
        if isinstance(instance, Decimal):
            return instance.is_finite() and instance == instance.to_integral_value()
        return checker.is_type(instance, "integer")

    return checker.redefine("integer", is_integer)


class JsonSchemaOptions(RuleOptions):
    """Options of `JsonSchemaReward`."""

    schema_: dict[str, Any] | bool | str | None = Field(default=None, alias="schema")
    """The JSON Schema every sample is checked against (a mapping, or its JSON text). When given,
    per-sample schemas are ignored. A schema that is itself broken is a config error."""
    schema_field: str = "schema"
    """Where a per-sample schema sits in ``sample.fields`` when ``schema`` is not given; a mapping
    or its JSON text (datasets often store schemas as strings, since they differ in shape from row
    to row)."""
    extract: Literal["auto", "whole", "fenced"] = "auto"
    """Where the JSON is. ``whole``: the whole answer region. ``fenced``: the fenced block marked
    ``json``, else an unmarked one that holds JSON, found as CommonMark finds them (several blocks
    that hold different JSON are no single output). ``auto``: the ```` ```json ```` block if there
    is one, else the whole answer region."""
    check_formats: bool = False
    """Also assert ``format`` keywords (``email``, ``date-time``, ...); off by default, as the JSON
    Schema specification makes ``format`` an annotation only."""
    max_errors: int = Field(default=10, ge=1)
    """How many validation errors ``details["errors"]`` lists."""

    @model_validator(mode="after")
    def _valid_schema(self) -> JsonSchemaOptions:
        if self.schema_ is not None:
            try:
                load_validator(self.schema_, check_formats=self.check_formats)
            except ValueError as error:
                raise OptionError("schema", str(error)) from None
        return self


@takes_options(JsonSchemaOptions)
class JsonSchemaReward(RuleReward):
    """1.0 when the completion holds JSON that is valid under a JSON Schema, else 0.0.

    Options: `JsonSchemaOptions` (the schema or where each sample's is, where the JSON is), and
    where the answer is read and how checks run (`RuleOptions`).

    A completion that holds no JSON at all scores 0.0 with the parse error as the reason: producing
    JSON was the model's task. A schema that is itself broken is not the model's fault: given as an
    option it is a config error, given per sample it makes that sample ``invalid_input``.

    JSON is read strictly: ``NaN``, ``Infinity`` and an object with a key twice (a first-wins and
    a last-wins reader disagree on it) are not JSON. The draft is the one the schema's ``$schema``
    names, else Draft 2020-12. ``$ref``s outside the schema (``http://``, ``file://``, or relative to
    such an ``$id``) are never fetched: a schema that needs one is ``invalid_input``. ``pattern``
    is matched in linear time by RE2 where RE2 can run it (see the module docstring).

    Example:
        >>> from rewardlab import Sample
        >>> reward = JsonSchemaReward(schema={"type": "object", "required": ["city"]})
        >>> [s.value for s in reward.score([
        ...     Sample(completion='```json\\n{"city": "Paris"}\\n```'),
        ...     Sample(completion='{"town": "Paris"}'),
        ... ])]
        [1.0, 0.0]
    """

    name = "json_schema"

    def __init__(
        self,
        *,
        schema: Mapping[str, Any] | bool | str | None = None,
        schema_field: str = "schema",
        extract: Literal["auto", "whole", "fenced"] = "auto",
        check_formats: bool = False,
        max_errors: int = 10,
        answer_region: Any = None,
        execution: Literal["worker", "inline"] = "worker",
        sample_budget_s: float = DEFAULT_SAMPLE_BUDGET_S,
        name: str | None = None,
    ):
        self.configure_rule(answer_region=answer_region, execution=execution, sample_budget_s=sample_budget_s)
        self.schema = schema
        # Built here so that a bad schema is a config error now; rebuilt after unpickling
        # (jsonschema validators hold closures that do not pickle).
        self.validator = None if schema is None else load_validator(schema, check_formats=check_formats)
        self.schema_field = schema_field
        self.extract = extract
        self.check_formats = check_formats
        self.max_errors = max_errors
        if name is not None:
            self.name = name

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "validator": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.schema is not None:
            self.validator = load_validator(self.schema, check_formats=self.check_formats)

    def check(self, sample: Sample) -> Score:
        validator, schema_source = self._validator(sample)
        region = self.answer(sample)
        if region.text is None:
            return Score(0.0, reason=region.reason, details={"extracted_from": None})
        found = self._json_text(region.text)
        if found is None:
            return Score(0.0, reason="no ```json fenced block", details={"extracted_from": None})
        if found[1] == "several":
            return Score(0.0, reason=found[0], details={"extracted_from": None})
        text, extracted_from = found
        details: dict[str, Any] = {"extracted_from": extracted_from}
        after = region.text[region.text.rfind("```") + 3 :] if extracted_from == "fenced" else ""
        before = region.text[: region.text.find("```")] if extracted_from == "fenced" else ""
        taken_back = retraction(after) or _disowning(after) or _disowning(before[-_LEAD_IN_CHARS:])
        if taken_back is not None:
            # "```json ...```  Actually, that JSON is wrong": the completion disowns its output.
            reason = f"the completion takes its output back ({taken_back!r})"
            return Score(0.0, reason=reason, details=details)
        try:
            instance = _loads(text)
        except (ValueError, RecursionError) as error:
            # Not JSON, or JSON no reader should accept: nested past Python's recursion limit, or
            # a number of more than 4,300 digits. Either way the model did not produce the JSON.
            message = str(error) if isinstance(error, ValueError) else "nested too deeply to read"
            return Score(0.0, reason=f"not JSON: {message}", details={**details, "json_error": message})
        try:
            errors = sorted(validator.iter_errors(instance), key=lambda e: (e.json_path, e.message))
        except Unresolvable as error:
            raise InvalidInput(
                schema_source, f"the schema has a $ref that cannot be resolved: {error}"
            ) from None
        details.update(
            error_count=len(errors),
            errors=[{"path": e.json_path, "message": _clipped(e.message)} for e in errors[: self.max_errors]],
        )
        if errors:
            first = details["errors"][0]
            return Score(0.0, reason=f"{first['path']}: {first['message']}", details=details)
        return Score(1.0, details=details)

    def _validator(self, sample: Sample) -> tuple[Validator, str]:
        """The validator for this sample, and the name of where its schema came from."""
        if self.validator is not None:
            return self.validator, "schema"
        source = f"fields.{self.schema_field}"
        if self.schema_field not in sample.fields:
            raise InvalidInput(source, "missing, and the reward has no schema of its own")
        try:
            return load_validator(sample.fields[self.schema_field], check_formats=self.check_formats), source
        except ValueError as error:
            raise InvalidInput(source, str(error)) from None

    def _json_text(self, completion: str) -> tuple[str, str] | None:
        """The text to parse and where it came from ("fenced" or "whole"), or None if absent;
        ("why", "several") when fenced blocks hold different JSON (which one is the output?)."""
        if self.extract != "whole":
            blocks = _json_blocks(completion)
            if len({_meaning(block) for block in blocks}) > 1:
                return f"{len(blocks)} ```json blocks that differ: no single output", "several"
            if blocks:
                return blocks[-1], "fenced"
            if self.extract == "fenced":
                return None
        return completion, "whole"

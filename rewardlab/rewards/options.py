"""Typed reward options: each reward type's options are one pydantic model, declared beside the
reward class, with a docstring per field, ``Literal`` choices and range constraints.

The same model checks every way a reward is made:

- from Python: ``MathAnswerReward(cas_budget_s=0)`` - the constructor is decorated with
  `takes_options`, which validates its arguments and hands it the model's values, defaults
  included (``MathAnswerReward.cas_budget_s: Input should be greater than 0``);
- from a config (a YAML file, ``rewardlab score``, the server, the benchmark runner):
  `rewardlab.build` calls that same constructor inside `config_path`, so an error names where
  the bad value sits (``components.accuracy.cas_budget_s: Input should be greater than 0``), and
  an unknown key lists the accepted options.

Why a decorator and not a constructor that takes a model instance: rewards keep keyword
signatures (what an editor, ``help()`` and TRL-style code see), and the decorator checks, when
the class is defined, that the signature names exactly the model's fields with the model's
defaults - so the two cannot drift apart.

`options_model` gives the model of every registered type (a user's reward registered without
one gets a model derived from its constructor), `options_schema` the JSON Schema of one type's
config and `config_schema` that of any reward config, for editors and ``rewardlab schema``.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import inspect
import math
import re
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    create_model,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from rewardlab.errors import ConfigError, MissingDependency
from rewardlab.rewards.answer_region import AnswerRegion
from rewardlab.rewards.contract import Reward
from rewardlab.rewards.sample_workers import DEFAULT_SAMPLE_BUDGET_S

RewardClass = TypeVar("RewardClass", bound=type)
JSON_SCHEMA_DRAFT = "https://json-schema.org/draft/2020-12/schema"
#: Names in a schema's ``$defs``: any reward config, and a `Combine` component (a reward config
#: with a ``weight``).
REWARD_CONFIG = "RewardConfig"
COMPONENT_CONFIG = "ComponentConfig"


class OptionError(ValueError):
    """Raised by a model validator about one option (a check across options, or one that no type
    or constraint expresses): the error then names that option's path."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


class RewardOptions(BaseModel):
    """The base of every reward's options: unknown options are refused, each field is documented
    by the docstring under it, and a nested block given in part (``steps: {max_steps: 8}``) keeps
    this reward's defaults for the keys it leaves out."""

    model_config = ConfigDict(
        extra="forbid",
        use_attribute_docstrings=True,
        arbitrary_types_allowed=True,
        allow_inf_nan=False,
        protected_namespaces=(),
    )

    name: str | None = None
    """Stable name in logs, metrics and breakdowns (default: the reward's type name)."""

    @model_validator(mode="before")
    @classmethod
    def _partial_blocks(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        merged = dict(data)
        for key, field in cls.model_fields.items():
            given = merged.get(field.alias or key)
            if isinstance(field.default, BaseModel) and isinstance(given, Mapping):
                merged[field.alias or key] = {**field.default.model_dump(by_alias=True), **given}
        return merged


class WorkerOptions(RewardOptions):
    """Options of a rule reward whose checks run in killable worker processes."""

    execution: Literal["worker", "inline"] = "worker"
    """``worker``: each sample's check runs in a killable rule worker under ``sample_budget_s``,
    so no completion can stall the caller; ``inline`` runs it in the calling thread, unbounded."""

    sample_budget_s: float = Field(default=DEFAULT_SAMPLE_BUDGET_S, gt=0)
    """Wall-clock budget of one sample's check in a worker; past it the sample gets status
    ``timeout``."""


def _answer_region(value: Any) -> Any:
    if value is None or isinstance(value, AnswerRegion):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_unset=True)
    try:
        return AnswerRegion.from_option(value)
    except ValueError as error:
        raise ValueError(str(error).removeprefix("answer_region").lstrip(".: ")) from None


class AnswerRegionMarkers(BaseModel):
    """Markers of an answer region of one's own; tags and markers given replace the defaults of
    their kind (see `rewardlab.rewards.answer_region`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    reasoning_tags: list[str] | None = None
    """Reasoning tags, removed: ``[think]`` means ``<think>...</think>``."""
    reasoning_markers: list[tuple[str, str]] | None = None
    """Reasoning blocks as ``[opening, closing]`` marker pairs, removed."""
    answer_tags: list[str] | None = None
    """Answer tags: when present, only their content counts."""
    answer_markers: list[tuple[str, str]] | None = None
    """Answer blocks as ``[opening, closing]`` marker pairs."""
    harmony: bool = True
    """Read Harmony channel markers (the final channel is the answer)."""
    prompt_opens_reasoning: bool = True
    """A closing reasoning marker without an opening one ends reasoning the prompt opened."""


#: Where a rule reward reads the answer: ``default`` (outside reasoning blocks, inside an answer
#: block when there is one), ``whole``, markers of one's own, or an `AnswerRegion`.
AnswerRegionOption = Annotated[
    Literal["default", "whole"] | AnswerRegionMarkers | SkipJsonSchema[InstanceOf[AnswerRegion]] | None,
    AfterValidator(_answer_region),
]


class RuleOptions(WorkerOptions):
    """Options of a rule reward that reads the model's answer: where the answer is, and how the
    checks run."""

    answer_region: AnswerRegionOption = None
    """Where the answer is read: ``default`` (outside reasoning blocks, inside an answer block
    when there is one), ``whole`` (the whole completion), or a mapping of markers (see
    `rewardlab.rewards.answer_region`)."""


def _ordered_scale(scale: tuple[int, int]) -> tuple[int, int]:
    if scale[0] >= scale[1]:
        raise ValueError(f"should be [low, high] with low < high, got {list(scale)}")
    return scale


#: A file or folder: its path in a config, a `Path` too from Python.
PathOption = str | SkipJsonSchema[InstanceOf[Path]]

#: ``[low, high]`` integers of a grading scale, low < high.
Scale = Annotated[tuple[int, int], AfterValidator(_ordered_scale)]

#: A bare tag name such as ``think``.
TagName = Annotated[str, Field(pattern=r"^[A-Za-z_][\w.-]*$")]


def _reward_config(value: Any) -> Any:
    if isinstance(value, Reward):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("type"), str):
        return dict(value)
    raise ValueError("should be a reward config: a mapping with a 'type' (see `rewardlab schema --list`)")


def _component_config(value: Any) -> Any:
    value = _reward_config(value)
    if isinstance(value, dict) and "weight" in value:
        weight = value["weight"]
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
            raise ValueError(f"weight should be a finite number, got {weight!r}")
    return value


# Stands for a reference to a reward config in a model's schema: pydantic resolves every "$ref"
# itself, and these point to definitions it does not know (`options_schema` adds them).
_CONFIG_REFERENCE = "x-rewardlab-config"
#: A nested reward: a config mapping (built with its place in the config named in errors), or
#: a `Reward` from Python.
RewardSpec = Annotated[
    Any, PlainValidator(_reward_config), WithJsonSchema({_CONFIG_REFERENCE: REWARD_CONFIG})
]
#: A `Combine` component: a reward config that may add a ``weight``, or a `Reward`.
ComponentSpec = Annotated[
    Any, PlainValidator(_component_config), WithJsonSchema({_CONFIG_REFERENCE: COMPONENT_CONFIG})
]


# Where the config being built sits in a larger one; None outside `rewardlab.build`.
_config_path: contextvars.ContextVar[str | None] = contextvars.ContextVar("config_path", default=None)


@contextlib.contextmanager
def config_path(path: str) -> Iterator[None]:
    """Rewards constructed inside this block report option errors at ``path``."""
    token = _config_path.set(path)
    try:
        yield
    finally:
        _config_path.reset(token)


def nested_path(*parts: object) -> str:
    """The config path of a nested entry of the reward being built (``components.accuracy``)."""
    return join_path(_config_path.get() or "", *parts)


def join_path(*parts: object) -> str:
    return ".".join(str(part) for part in parts if str(part))


def takes_options(model: type[RewardOptions]) -> Callable[[RewardClass], RewardClass]:
    """Class decorator: the reward's constructor validates its arguments with ``model`` and
    receives every option's validated value (defaults included). Refuses, when the class is
    defined, a constructor whose options or defaults differ from the model's."""

    def decorate(cls: RewardClass) -> RewardClass:
        init = cls.__dict__["__init__"]
        check_signature(cls, model)
        positional = [
            p.name
            for p in list(inspect.signature(init).parameters.values())[1:]
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if len(args) > len(positional):
                raise TypeError(f"{cls.__name__}() takes {len(positional)} positional arguments")
            given = dict(zip(positional, args, strict=False))
            twice = given.keys() & kwargs.keys()
            if twice:
                raise TypeError(f"{cls.__name__}() got several values for {sorted(twice)}")
            init(self, **validate_options(model, {**given, **kwargs}, where=cls.__name__))

        __init__.__options_model__ = model  # type: ignore[attr-defined]
        cls.__init__ = __init__  # type: ignore[misc]
        cls.Options = model  # type: ignore[attr-defined]
        return cls

    return decorate


def validate_options(model: type[BaseModel], options: Mapping[str, Any], *, where: str) -> dict[str, Any]:
    """Every option of ``model``, validated, by the name the constructor takes; a `ConfigError`
    naming the config path (inside `rewardlab.build`) or ``where`` (a Python call) otherwise."""
    try:
        instance = model.model_validate(dict(options))
    except ValidationError as error:
        path = _config_path.get()
        raise options_error(error, model, path if path is not None else where) from None
    return {field.alias or name: getattr(instance, name) for name, field in model.model_fields.items()}


def given_options(model: type[BaseModel], options: Mapping[str, Any], *, path: str) -> dict[str, Any]:
    """Only the options given, validated: for a user's reward whose own defaults apply."""
    try:
        instance = model.model_validate(dict(options))
    except ValidationError as error:
        raise options_error(error, model, path) from None
    values = {key: getattr(instance, key) for key in instance.model_fields_set}
    return {**values, **(instance.model_extra or {})}


def options_error(error: ValidationError, model: type[BaseModel], root: str) -> ConfigError:
    """One `ConfigError` for a failed validation: the first problem's path and message, then the
    others'."""
    problems = _problems(error, model)
    (first_loc, first_message), *others = problems
    message = first_message + "".join(f"; {join_path(root, *loc)}: {text}" for loc, text in others)
    return ConfigError(join_path(root, *first_loc), message)


# What pydantic puts in an error's location for the member of a union that failed.
_UNION_MEMBER = re.compile(r".*[\[(].*|str|int|float|bool|none|list|dict|tuple|set|any")


def _problems(error: ValidationError, model: type[BaseModel]) -> list[tuple[tuple[str, ...], str]]:
    """(location, message) of each problem. Of the union members that failed at one place, the
    deepest failures are kept (the member the value was meant for), and a failed "is an instance
    of" is dropped (a Python object was not what the config meant)."""
    members = {nested.__name__ for nested in _nested_models(model)}
    entries = []
    for item in error.errors(include_url=False):
        raw = tuple(str(part) for part in item["loc"])
        cause = (item.get("ctx") or {}).get("error")
        if isinstance(cause, OptionError):
            raw = (*raw, cause.option)
        loc = tuple(part for part in raw if not _UNION_MEMBER.fullmatch(part) and part not in members)
        entries.append((loc, len(raw), item["type"], _message(item, model, loc)))
    by_place: dict[tuple[str, ...], list[tuple[tuple[str, ...], int, str, str]]] = {}
    for entry in entries:
        by_place.setdefault(entry[0][:1], []).append(entry)
    problems: list[tuple[tuple[str, ...], str]] = []
    for group in by_place.values():
        meaningful = [e for e in group if e[2] not in ("is_instance_of", "none_required")] or group
        deepest = max(depth for _, depth, _, _ in meaningful)
        kept = [e for e in meaningful if e[1] == deepest]
        for loc in dict.fromkeys(loc for loc, *_ in kept):
            texts = list(dict.fromkeys(text for other, _, _, text in kept if other == loc))
            problems.append((loc, " or ".join(texts)))
    return problems


def _message(item: Mapping[str, Any], model: type[BaseModel], loc: tuple[str, ...]) -> str:
    if item["type"] == "extra_forbidden":
        accepted = _accepted_options(model, list(loc[:-1]))
        return "unknown option" + (f"; accepted options: {', '.join(accepted)}" if accepted else "")
    if item["type"] in ("model_type", "model_attributes_type", "dict_type"):
        return "Input should be a mapping"
    text = str(item["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        text = text.removeprefix(prefix)
    return text


def _nested_models(model: type[BaseModel]) -> set[type[BaseModel]]:
    """``model`` and every model its fields hold, however deep."""
    found, waiting = set(), [model]
    while waiting:
        current = waiting.pop()
        if current in found:
            continue
        found.add(current)
        for field in current.model_fields.values():
            waiting += _models_in(field.annotation)
    return found


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in typing.get_args(annotation) for model in _models_in(argument)]


def _accepted_options(model: type[BaseModel], loc: list[str]) -> list[str]:
    """The options of the block at ``loc`` inside ``model``."""
    current = [model]
    for part in loc:
        following: list[type[BaseModel]] = []
        for candidate in current:
            fields = {field.alias or name: field for name, field in candidate.model_fields.items()}
            if part in fields:
                following += _models_in(fields[part].annotation)
            elif "type" in candidate.model_fields and candidate.model_fields["type"].default == part:
                following.append(candidate)  # the tag of a union on ``type``
        if not following:
            return []
        current = following
    return option_names(current[0])


def option_names(model: type[BaseModel]) -> list[str]:
    """``model``'s options, those it declares itself first, then those of its bases."""
    mro = [klass for klass in model.__mro__ if issubclass(klass, BaseModel)]

    def declared_at(name: str) -> int:
        return next(i for i, klass in enumerate(mro) if name in getattr(klass, "__annotations__", {}))

    names = sorted(model.model_fields, key=declared_at)
    return [model.model_fields[name].alias or name for name in names]


def _unwrapped(function: Any) -> Any:
    return getattr(function, "__wrapped__", function)


def signature_options(cls: type) -> dict[str, Any]:
    """Every option ``cls``'s constructor takes and its default (``inspect.Parameter.empty`` for
    a required one), following ``**options`` to the base classes' constructors."""
    found: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass is object:
            break
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        passes_on = False
        for parameter in list(inspect.signature(_unwrapped(init)).parameters.values())[1:]:
            if parameter.kind is parameter.VAR_KEYWORD:
                passes_on = True
            elif parameter.kind is not parameter.VAR_POSITIONAL:
                found.setdefault(parameter.name, parameter.default)
        if not passes_on:
            break
    return found


def check_signature(cls: type, model: type[BaseModel]) -> None:
    """A `TypeError` unless ``cls``'s constructor takes exactly ``model``'s options, with the
    same defaults."""
    taken = signature_options(cls)
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    problems = []
    if set(taken) != set(fields):
        missing, extra = sorted(set(fields) - set(taken)), sorted(set(taken) - set(fields))
        problems.append(f"options only in the model: {missing}; only in the constructor: {extra}")
    for key in sorted(set(taken) & set(fields)):
        field, default = fields[key], taken[key]
        if field.is_required() != (default is inspect.Parameter.empty):
            problems.append(f"{key} is required in one and not in the other")
        elif not field.is_required() and field.get_default(call_default_factory=True) != default:
            problems.append(
                f"{key} defaults to {field.get_default(call_default_factory=True)!r} "
                f"in the model and to {default!r} in the constructor"
            )
    if problems:
        raise TypeError(f"{cls.__name__} and {model.__name__} disagree: {'; '.join(problems)}")


def declared_model(cls: type) -> type[RewardOptions] | None:
    """The options model ``cls``'s constructor was declared with (`takes_options`), if any."""
    return getattr(cls.__init__, "__options_model__", None)  # type: ignore[misc]


_ARGUMENT = re.compile(r"^\s{4,}(\w+)(?:\s*\([^)]*\))?:\s*(.+)$")


def _argument_docs(docstring: str | None) -> dict[str, str]:
    """The first line of each entry of a Google-style ``Args:`` section."""
    found: dict[str, str] = {}
    in_args = False
    for line in (docstring or "").splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
        elif in_args and line.strip() and not line.startswith((" ", "\t")):
            in_args = False
        elif in_args and (match := _ARGUMENT.match(line)):
            found.setdefault(match.group(1), match.group(2).strip())
    return found


def _schema_ready(annotation: Any) -> Any:
    """``annotation``, or ``Any`` where pydantic cannot check it or write its JSON Schema."""
    try:
        TypeAdapter(annotation, config=ConfigDict(arbitrary_types_allowed=True)).json_schema()
    except Exception:  # noqa: BLE001 - any annotation a user wrote
        return Any
    return annotation


@functools.cache
def derived_model(cls: type) -> type[BaseModel]:
    """An options model from the constructor of a reward registered without one: a field per
    parameter, typed by its annotation where pydantic can check it, described by the class's
    ``Args:`` docstring section."""
    init = _unwrapped(cls.__init__)  # type: ignore[misc]
    try:
        hints = typing.get_type_hints(init)
    except Exception:  # noqa: BLE001 - annotations naming what cannot be imported here
        hints = {}
    described = {**_argument_docs(init.__doc__), **_argument_docs(cls.__doc__)}
    fields: dict[str, Any] = {}
    extra: Literal["forbid", "allow"] = "forbid"
    for parameter in list(inspect.signature(init).parameters.values())[1:]:
        if parameter.kind is parameter.VAR_KEYWORD:
            extra = "allow"
            continue
        if parameter.kind is parameter.VAR_POSITIONAL:
            continue
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        description = described.get(parameter.name) or f"The {parameter.name!r} argument of {cls.__name__}."
        annotation = _schema_ready(hints.get(parameter.name, Any))
        fields[parameter.name] = (annotation, Field(default, description=description))
    return create_model(
        f"{cls.__name__}Options",
        __config__=ConfigDict(extra=extra, arbitrary_types_allowed=True, protected_namespaces=()),
        __doc__=(cls.__doc__ or cls.__name__).strip().splitlines()[0],
        **fields,
    )


def options_model(kind: str) -> type[BaseModel]:
    """The options model of a registered reward type (`rewardlab.available`): the one its class
    declares, or one derived from its constructor. `KeyError` for an unknown type,
    `MissingDependency` when its module needs an extra that is not installed."""
    from rewardlab.rewards.registry import reward_class

    cls = reward_class(kind)
    return declared_model(cls) or derived_model(cls)


def description(kind: str) -> str:
    """What a reward type is, in one line: the first paragraph of its class's docstring."""
    from rewardlab.rewards.registry import reward_class

    paragraph = inspect.cleandoc(reward_class(kind).__doc__ or kind).split("\n\n")[0]
    return " ".join(paragraph.replace(" (see the module docstring)", "").split())


def _kind_schema(kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The schema of one type's config (its options and ``type``) and the definitions it uses."""
    try:
        model = options_model(kind)
    except MissingDependency as error:
        stub = {
            "type": "object",
            "title": kind,
            "description": str(error),
            "properties": {"type": {"const": kind}},
            "required": ["type"],
        }
        return stub, {}
    schema = _with_config_references(model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}"))
    definitions = schema.pop("$defs", {})
    schema["title"] = kind
    schema["description"] = description(kind)
    schema["properties"] = {
        "type": {"const": kind, "description": "The reward type."},
        **schema.get("properties", {}),
    }
    schema["required"] = ["type", *schema.get("required", [])]
    return schema, definitions


def _with_config_references(schema: Any) -> Any:
    """``schema`` with each stand-in for a reward config made a "$ref" to its definition."""
    if isinstance(schema, Mapping):
        replaced = {key: _with_config_references(value) for key, value in schema.items()}
        name = replaced.pop(_CONFIG_REFERENCE, None)
        return {"$ref": f"#/$defs/{name}", **replaced} if name else replaced
    if isinstance(schema, list):
        return [_with_config_references(value) for value in schema]
    return schema


def _uses(schema: Any, name: str) -> bool:
    if isinstance(schema, Mapping):
        return schema.get("$ref") == f"#/$defs/{name}" or any(_uses(v, name) for v in schema.values())
    if isinstance(schema, list):
        return any(_uses(v, name) for v in schema)
    return False


def _merge_definitions(into: dict[str, Any], definitions: Mapping[str, Any]) -> None:
    for name, schema in definitions.items():
        if name in into and into[name] != schema:
            raise RuntimeError(f"two different option models are both named {name!r}")
        into[name] = schema


def _every_config(definitions: dict[str, Any]) -> list[dict[str, str]]:
    """Add every registered type's config schema (and its weighted variant, for `Combine`
    components) to ``definitions``; the references to the configs, in order."""
    from rewardlab.rewards.registry import available

    references, weighted = [], []
    for kind in available():
        schema, nested = _kind_schema(kind)
        _merge_definitions(definitions, nested)
        definitions[f"config.{kind}"] = schema
        component = copy.deepcopy(schema)
        component["properties"]["weight"] = {
            "type": "number",
            "default": 1.0,
            "description": "The component's weight in a weighted sum.",
        }
        definitions[f"component.{kind}"] = component
        references.append({"$ref": f"#/$defs/config.{kind}"})
        weighted.append({"$ref": f"#/$defs/component.{kind}"})
    definitions[REWARD_CONFIG] = {
        "description": "A reward config: a registered `type` and its options.",
        "oneOf": references,
    }
    definitions[COMPONENT_CONFIG] = {
        "description": "A reward config with an optional `weight`.",
        "oneOf": weighted,
    }
    return references


def options_schema(kind: str) -> dict[str, Any]:
    """JSON Schema of a config of one reward type: ``type: <kind>`` and its options, for a YAML
    editor to check a config file against. Nested rewards (``combine`` components, ``route``
    routes) refer to the schema of every registered type."""
    from rewardlab.rewards.registry import available

    if kind not in available():
        raise KeyError(kind)
    schema, definitions = _kind_schema(kind)
    if any(_uses([schema, definitions], name) for name in (REWARD_CONFIG, COMPONENT_CONFIG)):
        _every_config(definitions)
    return {"$schema": JSON_SCHEMA_DRAFT, **schema, **({"$defs": definitions} if definitions else {})}


def config_schema() -> dict[str, Any]:
    """JSON Schema of any reward config: one of the registered types, each with its options."""
    definitions: dict[str, Any] = {}
    references = _every_config(definitions)
    return {
        "$schema": JSON_SCHEMA_DRAFT,
        "title": "rewardlab reward config",
        "description": "A reward config: a registered `type` and its options (`rewardlab schema --list`).",
        "oneOf": references,
        "$defs": definitions,
    }

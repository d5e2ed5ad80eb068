import json
import time

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewardlab
from rewardlab import ConfigError, Sample, Status
from rewardlab.rewards.json_schema import JsonSchemaReward, load_validator

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "scores": {"type": "array", "items": {"type": "integer"}}},
    "required": ["name", "age"],
}


def score_one(reward, sample):
    (score,) = reward.score([sample])
    return score


def test_valid_json_scores_one():
    score = score_one(JsonSchemaReward(schema=PERSON), Sample(completion='{"name": "Ada", "age": 36}'))
    assert (score.status, score.value) == (Status.OK, 1.0)
    assert score.details == {"extracted_from": "whole", "error_count": 0, "errors": []}


def test_validation_errors_are_listed_with_paths():
    score = score_one(
        JsonSchemaReward(schema=PERSON), Sample(completion='{"name": "Ada", "scores": [1, "x"]}')
    )
    assert (score.status, score.value) == (Status.OK, 0.0)
    assert score.details["error_count"] == 2
    # Sorted by path: the root ("$") before "$.scores[1]".
    assert score.details["errors"] == [
        {"path": "$", "message": "'age' is a required property"},
        {"path": "$.scores[1]", "message": "'x' is not of type 'integer'"},
    ]
    assert score.reason == "$: 'age' is a required property"


def test_error_list_is_capped_but_counted():
    schema = {"type": "object", "required": ["a", "b", "c"]}
    score = score_one(JsonSchemaReward(schema=schema, max_errors=2), Sample(completion="{}"))
    assert score.details["error_count"] == 3
    assert [e["message"] for e in score.details["errors"]] == [
        "'a' is a required property",
        "'b' is a required property",
    ]


def test_not_json_is_an_ok_zero():
    score = score_one(JsonSchemaReward(schema=PERSON), Sample(completion="Sure! Here is the person: Ada, 36"))
    assert (score.status, score.value) == (Status.OK, 0.0)
    assert score.reason.startswith("not JSON: Expecting value")
    assert "json_error" in score.details


def test_extract_modes():
    fenced_text = (
        'First try:\n```json\n{"name": 1}\n```\nFixed:\n```JSON\n{"name": "Ada", "age": 1}\n```\nDone.'
    )
    auto = score_one(JsonSchemaReward(schema=PERSON), Sample(completion=fenced_text))
    # Two blocks that differ: which one is the output depends on the reader, so neither is.
    assert (auto.value, auto.status) == (0.0, Status.OK) and "differ" in auto.reason
    again = fenced_text.replace('{"name": 1}', '{"age": 1, "name": "Ada"}')  # the same object twice
    assert score_one(JsonSchemaReward(schema=PERSON), Sample(completion=again)).value == 1.0
    last = fenced_text.replace('First try:\n```json\n{"name": 1}\n```\n', "")
    auto = score_one(JsonSchemaReward(schema=PERSON), Sample(completion=last))
    assert (auto.value, auto.details["extracted_from"]) == (1.0, "fenced")
    whole = score_one(JsonSchemaReward(schema=PERSON, extract="whole"), Sample(completion=fenced_text))
    assert (whole.value, whole.details["extracted_from"]) == (0.0, "whole")
    assert whole.reason.startswith("not JSON")
    unfenced = Sample(completion='{"name": "Ada", "age": 1}')
    assert score_one(JsonSchemaReward(schema=PERSON), unfenced).value == 1.0
    fenced_only = score_one(JsonSchemaReward(schema=PERSON, extract="fenced"), unfenced)
    assert (fenced_only.status, fenced_only.value) == (Status.OK, 0.0)
    assert "fenced" in fenced_only.reason


def test_per_sample_schema_as_mapping_or_json_text():
    reward = JsonSchemaReward()
    samples = [
        Sample(completion='{"n": 1}', fields={"schema": {"properties": {"n": {"type": "integer"}}}}),
        Sample(
            completion='{"n": "1"}', fields={"schema": json.dumps({"properties": {"n": {"type": "integer"}}})}
        ),
    ]
    assert [s.value for s in reward.score(samples)] == [1.0, 0.0]


def test_constructor_schema_wins_over_per_sample_schema():
    sample = Sample(completion="[]", fields={"schema": {"type": "object"}})
    assert score_one(JsonSchemaReward(schema={"type": "array"}), sample).value == 1.0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "missing"),
        ({"schema": {"type": "bogus"}}, "invalid schema at $.type"),
        ({"schema": "{not json"}, "the schema is not JSON"),
        ({"schema": 42}, "a schema is a JSON object or a boolean"),
        ({"schema": {"$ref": "https://example.com/person.json"}}, "cannot be resolved"),
    ],
)
def test_bad_per_sample_schema_is_invalid_input(fields, message):
    score = score_one(JsonSchemaReward(), Sample(completion="{}", id="row-3", fields=fields))
    assert score.status is Status.INVALID_INPUT and score.value is None
    assert "sample 'row-3'" in score.reason and "fields.schema" in score.reason
    assert message in score.reason


def test_bad_constructor_schema_is_a_config_error():
    with pytest.raises(ValueError, match="invalid schema"):
        JsonSchemaReward(schema={"type": 12})
    with pytest.raises(ConfigError, match="invalid schema"):
        rewardlab.build({"type": "json_schema", "schema": {"required": "name"}})


def test_draft_follows_dollar_schema_else_2020_12():
    # The array form of "items" is tuple validation in draft 7 and an invalid schema in 2020-12.
    tuple_items = {"items": [{"type": "integer"}]}
    with pytest.raises(ValueError, match="invalid schema"):
        JsonSchemaReward(schema=tuple_items)
    draft7 = JsonSchemaReward(schema={"$schema": "http://json-schema.org/draft-07/schema#", **tuple_items})
    assert [s.value for s in draft7.score([Sample(completion="[1, 2]"), Sample(completion='["x"]')])] == [
        1.0,
        0.0,
    ]


def test_formats_are_annotations_unless_checked():
    email = {"type": "string", "format": "email"}
    sample = Sample(completion='"not an address"')
    assert score_one(JsonSchemaReward(schema=email), sample).value == 1.0
    checked = score_one(JsonSchemaReward(schema=email, check_formats=True), sample)
    assert checked.value == 0.0
    assert "is not a 'email'" in checked.reason


def test_boolean_schema_false_rejects_everything():
    score = score_one(JsonSchemaReward(schema=False), Sample(completion="1"))
    assert score.value == 0.0
    assert score.details["errors"][0]["path"] == "$"


def test_build_json_schema_with_chat_completion():
    reward = rewardlab.build({"type": "json_schema", "schema": PERSON, "extract": "fenced"})
    chat = [{"role": "assistant", "content": '```json\n{"name": "Ada", "age": 36}\n```'}]
    assert score_one(reward, Sample(completion=chat)).value == 1.0
    with pytest.raises(ConfigError, match="extract"):
        rewardlab.build({"type": "json_schema", "extract": "last"})


def test_nan_and_infinity_are_not_json():
    reward = JsonSchemaReward(
        schema={"properties": {"score": {"type": "number", "minimum": 0, "maximum": 10}}}
    )
    nan, infinite, fine = reward.score(
        [
            Sample(completion='{"score": NaN}'),
            Sample(completion='{"score": Infinity}'),
            Sample(completion='{"score": 7}'),
        ]
    )
    assert (nan.value, infinite.value, fine.value) == (0.0, 0.0, 1.0)
    assert "NaN is not JSON" in nan.reason


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.recursive(
            st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, 2.5, "a"]),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("ab"), inner, max_size=2)
            ),
            max_leaves=6,
        ),
        max_size=6,
    )
)
def test_unique_items_agrees_with_jsonschema(items):
    ours = load_validator({"uniqueItems": True}, check_formats=False)
    theirs = jsonschema.Draft202012Validator({"uniqueItems": True})
    assert ours.is_valid(items) == theirs.is_valid(items)


def test_unique_items_is_linear():
    reward = JsonSchemaReward(schema={"type": "array", "uniqueItems": True}, execution="inline")
    items = json.dumps([{"id": i, "tags": [i, str(i)]} for i in range(20_000)])
    started = time.perf_counter()
    (score,) = reward.score([Sample(completion=items)])
    assert score.value == 1.0 and time.perf_counter() - started < 2.0


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ('```\n{"name": "Ada", "age": 1}\n```', 1.0),  # an unmarked block that holds JSON
        ('``` json\n{"name": "Ada", "age": 1}\n```', 1.0),
        ('```json\n{"name": "Ada", "age": 1, "note": "use ``` fences"}\n```', 1.0),
        ('```json\n{"name": "Ada", "age": 1}```', 1.0),  # closing backticks ending the line
        ('````markdown\n```json\n{"name": "Ada", "age": 1}\n```\n````\nNo JSON here.', 0.0),  # an example
        ('{"name": "Ada", "age": 1, "name": "Bob"}', 0.0),  # a key twice
    ],
)
def test_json_found_as_markdown_renders_it(completion, expected):
    assert score_one(JsonSchemaReward(schema=PERSON), Sample(completion=completion)).value == expected

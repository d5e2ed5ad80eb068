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


@pytest.mark.parametrize(
    ("draft", "value"),
    [
        ("https://json-schema.org/draft/2020-12/schema", "36.0"),
        ("http://json-schema.org/draft-07/schema#", "36.0"),
        ("http://json-schema.org/draft-06/schema#", "3.6e1"),
        ("http://json-schema.org/draft-04/schema#", "36.0"),
        ("https://json-schema.org/draft/2020-12/schema", "36.5"),
        ("https://json-schema.org/draft/2020-12/schema", "36.00000000000000000001"),
        ("https://json-schema.org/draft/2020-12/schema", "1e400"),
    ],
)
def test_integers_with_a_zero_fraction_follow_the_draft(draft, value):
    # Drafts 6 and later count 36.0 as an integer, 4 does not (the reference validator on floats
    # agrees); the reward parses numbers exactly, so 36.00000000000000000001 is no integer even
    # though its float is, and 1e400 is one although its float (infinity) is not.
    schema = {"$schema": draft, "type": "integer"}
    expected = jsonschema.validators.validator_for(schema)(schema).is_valid(json.loads(value))
    expected = {"36.00000000000000000001": False, "1e400": True}.get(value, expected)
    (score,) = JsonSchemaReward(schema=schema).score([Sample(completion=value)])
    assert (score.status, score.value) == (Status.OK, 1.0 if expected else 0.0)


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


class _SchemaHost:
    """A real HTTP server on 127.0.0.1 that would serve a permissive schema for any path, and
    records every request: a schema reward must never ask it for anything."""

    def __init__(self):
        import http.server
        import threading

        self.paths = []
        host = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                host.paths.append(self.path)
                body = b"{}"  # a schema that accepts anything: fetched, it would decide the reward
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def schema_host():
    host = _SchemaHost()
    yield host
    host.close()


def _refs(host, tmp_path):
    """Schemas whose only content is a reference out of the document: over HTTP, relative to an
    HTTP ``$id``, and to a real file on disk."""
    on_disk = tmp_path / "person.json"
    on_disk.write_text("{}")
    return {
        "http": {"$ref": f"{host.url}/schema.json"},
        "relative to an http $id": {"$id": f"{host.url}/root.json", "$ref": "other.json"},
        "file": {"$ref": on_disk.as_uri()},
        "file under a file $id": {"$id": (tmp_path / "root.json").as_uri(), "$ref": "person.json"},
    }


@pytest.mark.parametrize("execution", ["worker", "inline"])
def test_references_out_of_the_schema_are_never_fetched(schema_host, tmp_path, execution):
    """A fetched document would decide the reward (and a URL that never answers would hold the
    scoring for as long as the socket waits): every such reference is unresolvable, whether the
    schema came with the sample or with the config."""
    for name, schema in _refs(schema_host, tmp_path).items():
        per_sample = JsonSchemaReward(execution=execution)
        score = score_one(per_sample, Sample(completion="{}", fields={"schema": schema}))
        assert score.status is Status.INVALID_INPUT and "cannot be resolved" in score.reason, name
        configured = JsonSchemaReward(schema=schema, execution=execution)
        score = score_one(configured, Sample(completion="{}"))
        assert score.status is Status.INVALID_INPUT and "cannot be resolved" in score.reason, name
    assert schema_host.paths == []


def test_references_inside_the_schema_and_to_the_metaschema_still_resolve():
    schema = {
        "$defs": {"name": {"type": "string"}},
        "properties": {
            "name": {"$ref": "#/$defs/name"},
            "sub": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        },
    }
    reward = JsonSchemaReward(schema=schema)
    scores = reward.score(
        [Sample(completion='{"name": "Ada", "sub": {"type": "string"}}'), Sample(completion='{"name": 1}')]
    )
    assert [(s.status, s.value) for s in scores] == [(Status.OK, 1.0), (Status.OK, 0.0)]


def test_a_backtracking_pattern_is_matched_in_linear_time():
    """``^(a+)+$`` against 40 a's and a '!' takes Python's re about 2^40 steps; RE2 answers at
    once, so the sample is scored instead of timing out (and costing its worker)."""
    schema = {"type": "string", "pattern": "^(a+)+$"}
    reward = JsonSchemaReward(sample_budget_s=3.0)
    started = time.monotonic()
    scores = reward.score(
        [
            Sample(completion=json.dumps("a" * 40 + "!"), fields={"schema": schema}),
            Sample(completion=json.dumps("a" * 40), fields={"schema": schema}),
        ]
    )
    assert time.monotonic() - started < 2.5
    assert [(s.status, s.value) for s in scores] == [(Status.OK, 0.0), (Status.OK, 1.0)]
    assert "does not match" in scores[0].reason


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        # Lookahead and backreferences: RE2 cannot run them, Python's re does (under the budget).
        ("^(?=.*[0-9])[a-z0-9]+$", "abc1", True),
        ("^(?=.*[0-9])[a-z0-9]+$", "abc", False),
        (r"^(.)\1$", "xx", True),
        # ECMA-262, as RE2: "$" is the end of the string, not a final newline.
        ("^[a-z]+$", "abc\n", False),
        ("^[a-z]+$", "abc", True),
    ],
)
def test_patterns_keep_their_meaning(pattern, text, matches):
    reward = JsonSchemaReward(schema={"type": "string", "pattern": pattern}, execution="inline")
    assert score_one(reward, Sample(completion=json.dumps(text))).value == float(matches)

"""``served_reward_model``: against ``rewardlab serve-model --runner pooling`` serving a tiny
sequence classifier saved to a folder (a real server process, vLLM's pooling protocol), whose
scores must equal the in-process ``reward_model``'s for the same samples; and against scripted
servers of each protocol, for rendering, heads, shaping and failures one sample at a time."""

import pickle
import select
import subprocess
import sys
import tempfile
import time

import pytest

from rewardlab import ConfigError, Sample, Status, build
from rewardlab.reward_models.rendering import conversation_ids
from rewardlab.testing import PoolingReply, ScriptedPoolingServer
from tests.reward_models.tiny_models import save_classifier

USER = [{"role": "user", "content": "2+2?"}]
SAMPLES = [
    Sample(prompt="2+2?", completion="4, since 2+2=4."),
    Sample(prompt=USER, completion=[{"role": "assistant", "content": "Five."}]),
    Sample(prompt=[{"role": "system", "content": "Be brief."}, *USER], completion="4"),
    Sample(prompt="", completion="Just an answer."),
]
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.05}


def serve_pooling(folder, name="tiny-rm"):
    """``rewardlab serve-model --runner pooling`` on a free port; yields its address."""
    command = [sys.executable, "-m", "rewardlab.cli", "serve-model", "--runner", "pooling"]
    command += ["--model", str(folder), "--name", name, "--port", "0"]
    with tempfile.TemporaryFile(mode="w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        deadline, line = time.monotonic() + 120, ""
        while time.monotonic() < deadline and process.poll() is None:
            if select.select([process.stdout], [], [], 1.0)[0]:
                line = process.stdout.readline()
                if " at http" in line:
                    break
        if " at http" not in line:
            process.kill()
            errors.seek(0)
            raise RuntimeError(f"serve-model --runner pooling did not start: {errors.read()[-2000:]}")
        try:
            yield line.rsplit(" at ", 1)[1].strip()
        finally:
            process.terminate()
            process.wait(timeout=30)


@pytest.fixture(scope="module")
def rm_folder(tiny_tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("served") / "rm"
    save_classifier(folder, tiny_tokenizer, seed=3, max_position_embeddings=48)
    return folder


@pytest.fixture(scope="module")
def rm_server(rm_folder):
    yield from serve_pooling(rm_folder)


@pytest.fixture(scope="module")
def heads_folder(tiny_tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("served") / "armo"
    save_classifier(folder, tiny_tokenizer, num_labels=3, seed=4)
    return folder


@pytest.fixture(scope="module")
def heads_server(heads_folder):
    yield from serve_pooling(heads_folder, name="tiny-armo")


def values(scores):
    assert all(score.status is Status.OK for score in scores), [score.reason for score in scores]
    return [score.value for score in scores]


@pytest.mark.parametrize(
    "served",
    [
        {"protocol": "vllm_pooling"},
        {"protocol": "vllm_classify"},
        {"protocol": "vllm_pooling", "render": "tokenizer", "batch_size": 3},
        {"protocol": "vllm_classify", "model": "tiny-rm", "render": "tokenizer"},
    ],
    ids=["pooling-messages", "classify-messages", "pooling-token-ids", "classify-token-ids"],
)
def test_served_scores_equal_the_in_process_reward_model(rm_folder, rm_server, served):
    options = {"url": rm_server, **served}
    if served.get("render") == "tokenizer":
        options["tokenizer"] = str(rm_folder)
    expected = values(build({"type": "reward_model", "model": str(rm_folder)}).score(SAMPLES))
    got = values(build({"type": "served_reward_model", **options}).score(SAMPLES))
    assert got == pytest.approx(expected, abs=1e-5)


def test_named_heads_and_weights_over_the_wire(heads_folder, heads_server):
    options = {"heads": {"helpful": 0, "correct": 2}, "weights": {"helpful": 0.25, "correct": 1.0}}
    local = build({"type": "reward_model", "model": str(heads_folder), **options}).score(SAMPLES)
    served = build({"type": "served_reward_model", "url": heads_server, **options}).score(SAMPLES)
    assert values(served) == pytest.approx(values(local), abs=1e-5)
    for mine, theirs in zip(served, local, strict=True):
        assert mine.breakdown == pytest.approx(theirs.breakdown, abs=1e-5)


def test_a_multi_output_model_without_heads_fails_each_sample_with_the_reason(heads_server):
    scores = build({"type": "served_reward_model", "url": heads_server}).score(SAMPLES[:2])
    assert [score.status for score in scores] == [Status.ERROR] * 2
    assert "returned 3 outputs; name the ones to read with heads" in scores[0].reason


def test_an_input_longer_than_the_model_reads_fails_alone(rm_folder, rm_server):
    long = Sample(prompt="2+2?", completion="four " * 20)
    reward = build({"type": "served_reward_model", "url": rm_server, "render": "tokenizer"} | {
        "tokenizer": str(rm_folder), "client": FAST})  # fmt: skip
    first, refused, last = reward.score([SAMPLES[0], long, SAMPLES[3]])
    assert first.status is last.status is Status.OK
    assert refused.status is Status.INVALID_INPUT and refused.value is None
    assert (
        "the server refused it" in refused.reason and "maximum context length is 48 tokens" in refused.reason
    )


def test_the_server_applies_vllms_default_activation_unless_asked_not_to(rm_server):
    import json
    import urllib.request

    def post(route, body):
        request = urllib.request.Request(
            f"{rm_server}/{route}", json.dumps(body).encode(), {"content-type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    raw = post("pooling", {"input": "hello", "use_activation": False})["data"][0]["data"][0]
    squashed = post("classify", {"input": ["hello"]})
    assert squashed["data"][0]["probs"][0] == pytest.approx(1 / (1 + 2.718281828459045**-raw), abs=1e-6)
    assert squashed["data"][0]["num_classes"] == 1 and squashed["usage"]["prompt_tokens"] == 5
    with urllib.request.urlopen(f"{rm_server}/v1/models", timeout=30) as response:
        assert json.loads(response.read())["data"][0]["id"] == "tiny-rm"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"input": "x", "task": "embed"}, "Unsupported task"),
        ({"input": ""}, "Input cannot be empty"),
        ({"input": "x", "messages": USER}, "either input or messages"),
        ({"input": "x", "model": "other"}, "does not exist"),
        ({"input": "x", "truncate_prompt_tokens": 8}, "never cuts"),
    ],
)
def test_what_the_pooling_server_cannot_honour_is_refused(rm_server, body, problem):
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{rm_server}/pooling", json.dumps(body).encode(), {"content-type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code in (400, 404)
    assert problem in json.loads(refused.value.read())["error"]["message"]


# Scripted servers: rendering, shaping and failures, one protocol at a time.


def test_render_tokenizer_sends_the_ids_reward_model_reads(rm_folder):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(rm_folder)
    with ScriptedPoolingServer("sglang") as server:
        reward = build(
            {
                "type": "served_reward_model",
                "url": server.url,
                "protocol": "sglang",
                "tokenizer": str(rm_folder),
            }
        )
        values(reward.score(SAMPLES))
    expected = [
        conversation_ids(sample, tokenizer, chat_template=True, append_eos=True) for sample in SAMPLES
    ]
    assert server.requests == [{"input_ids": expected}]


def test_tei_gets_the_rendered_conversation_as_text(rm_folder):
    with ScriptedPoolingServer("tei") as server:
        reward = build(
            {"type": "served_reward_model", "url": server.url, "protocol": "tei", "tokenizer": str(rm_folder)}
        )
        [score] = reward.score(SAMPLES[1:2])
    assert server.requests[0]["inputs"] == [["user: 2+2?\nassistant: Five.\n"]]
    assert score.value == pytest.approx(len("user: 2+2?\nassistant: Five.\n") / 10)


def test_render_text_sends_prompt_plus_completion_and_refuses_messages():
    with ScriptedPoolingServer("vllm") as server:
        reward = build({"type": "served_reward_model", "url": server.url, "render": "text", "batch_size": 2})
        scores = reward.score(SAMPLES)
    assert [score.status for score in scores] == [
        Status.OK,
        Status.INVALID_INPUT,
        Status.INVALID_INPUT,
        Status.OK,
    ]
    assert "need render: messages (vLLM) or a tokenizer" in scores[1].reason
    assert [body["input"] for body in server.requests] == [["2+2?4, since 2+2=4.", "Just an answer."]]


def test_shaping_and_clip_apply_to_the_raw_output():
    with ScriptedPoolingServer("vllm", lambda item: [3.0]) as server:
        reward = build(
            {"type": "served_reward_model", "url": server.url, "shaping": "sigmoid", "clip": [0, 0.9]}
        )
        [score] = reward.score(SAMPLES[:1])
    assert score.value == 0.9 and score.details == {"raw": 3.0, "attempts": 1}


def test_a_refused_batch_is_asked_again_one_sample_at_a_time():
    with ScriptedPoolingServer("sglang") as server:
        server.script(PoolingReply(status=400), PoolingReply(), PoolingReply(status=422), PoolingReply())
        reward = build({"type": "served_reward_model", "url": server.url, "protocol": "sglang"})
        scores = reward.score([SAMPLES[0], SAMPLES[3], Sample(prompt="a", completion="b")])
    assert [score.status for score in scores] == [Status.OK, Status.INVALID_INPUT, Status.OK]
    assert "HTTP 422" in scores[1].reason and len(server.requests) == 4


def test_a_refusal_of_who_asks_rather_than_what_is_not_split_per_sample():
    with ScriptedPoolingServer("sglang") as server:
        server.script(PoolingReply(status=404))
        reward = build(
            {"type": "served_reward_model", "url": server.url, "protocol": "sglang", "model": "typo"}
        )
        scores = reward.score([SAMPLES[0], SAMPLES[3]])
    assert [score.status for score in scores] == [Status.BACKEND_ERROR] * 2
    assert "HTTP 404" in scores[0].reason and len(server.requests) == 1


def test_a_server_that_stays_down_fails_every_sample_with_backend_error():
    with ScriptedPoolingServer("vllm") as server:
        server.script(*[PoolingReply(status=503)] * 6)
        reward = build(
            {"type": "served_reward_model", "url": server.url, "client": {**FAST, "max_attempts": 3}}
        )
        scores = reward.score(SAMPLES[:2])
    assert [score.status for score in scores] == [Status.BACKEND_ERROR] * 2
    assert all(score.value is None and "gave up after 3 attempts" in score.reason for score in scores)
    assert "HTTP 503" in scores[0].reason and scores[0].reason.startswith(
        "sample #0: no score: vllm_pooling:"
    )


def test_a_non_finite_output_fails_its_sample():
    with ScriptedPoolingServer("sglang") as server:
        server.script(PoolingReply(raw_body='[{"embedding": [NaN]}, {"embedding": [1.0]}]'))
        reward = build({"type": "served_reward_model", "url": server.url, "protocol": "sglang"})
        scores = reward.score([SAMPLES[0], SAMPLES[3]])
    assert [score.status for score in scores] == [Status.ERROR, Status.OK]
    assert "not finite" in scores[0].reason


@pytest.mark.parametrize(
    ("options", "path", "message"),
    [
        ({"protocol": "tei", "render": "messages"}, "render", "does not render chat messages"),
        ({"render": "tokenizer"}, "tokenizer", "needs the model's folder"),
        ({"heads": {"a": 0, "b": 1}}, "weights", "several heads need weights"),
        ({"url": "127.0.0.1:8000"}, "url", "String should match pattern"),
        ({"protocol": "triton"}, "protocol", "Input should be 'vllm_pooling'"),
        ({"client": {"cache": None}}, "client.cache", "unknown option"),
    ],
)
def test_options_that_cannot_work_are_refused(options, path, message):
    with pytest.raises(ConfigError) as refused:
        build({"type": "served_reward_model", "url": "http://127.0.0.1:9", **options})
    assert refused.value.path == path and message in str(refused.value)


def test_it_pickles_and_scores_the_same_after():
    with ScriptedPoolingServer("vllm") as server:
        reward = build({"type": "served_reward_model", "url": server.url})
        copy = pickle.loads(pickle.dumps(reward))
        assert values(copy.score(SAMPLES)) == values(reward.score(SAMPLES))

"""Fixtures shared across the suite.

- A tiny causal LM and tokenizer built from a config. Nothing loads from the Hugging Face hub:
  the tokenizer is byte-level BPE without merges (every byte is a token) and the model is a
  randomly initialised two-layer Llama, small enough that a GRPO step takes a fraction of a
  second on a CPU.
- Markers for a quick inner loop, set here from what a test uses rather than by hand in every
  file (so a new test is marked by the same rules): ``sandbox`` (runs programs in bubblewrap),
  ``model`` (the embedded model or its server), ``ray`` (a local Ray cluster), ``training`` (a
  real trainer run), and ``slow``: any of those, or a test listed in `SLOW` (measured at a second
  or more on 2 cores). ``pytest -m "not slow"`` is the quick loop; ``pytest -m "not sandbox"``
  then ``pytest -n 0 -m sandbox`` runs everything (README's second command): the rest on one
  pytest-xdist worker per core, the sandbox tests alone in one process.
- For judges and rubrics: a scripted OpenAI-compatible server (faults and answers on demand),
  and the real local model server (``rewardlab serve-model`` over the embedded SmolLM2) started
  once per session on a free port. The local model comes from ``rewardlab fetch-model``; without
  it those tests are skipped, except in CI (``CI=1``), where a missing model must fail the run.
"""

import os
import select
import subprocess
import sys
import tempfile
import time

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each xdist worker gets one core's worth of threads: two workers each running torch on
    # every core would slow both, and the time-bound tests with them.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

from rewardlab.errors import MissingDependency
from rewardlab.testing import ScriptedServer

#: Fixtures that start the embedded model or the Ray cluster.
_MODEL_FIXTURES = frozenset({"model_available", "local_server"})
_RAY_FIXTURES = frozenset({"local_ray"})
#: Test files (under tests/) that are slow throughout, beyond what the rules below catch: the
#: time-bound fuzzers, every reward's property test, servers on loopback, retries that wait.
SLOW = frozenset({
    "test_parsers_time_bounds.py",
    "test_docs.py",
    "test_type_check.py",
    os.path.join("rewards", "test_rule_time_bounds.py"),
    os.path.join("rewards", "tool_calls", "test_time_bounds.py"),
    os.path.join("rewards", "tool_calls", "test_template_format.py"),
    os.path.join("rewards", "test_tool_call_and_similarity_paths.py"),
    os.path.join("rewards", "test_every_reward.py"),
    os.path.join("rewards", "code", "test_hostile_round24.py"),
    os.path.join("rewards", "math", "test_equivalence_set.py"),
    os.path.join("llm", "test_client.py"),
    os.path.join("serving", "test_hostile_clients.py"),
    os.path.join("serving", "test_server.py"),
    os.path.join("serving", "test_remote.py"),
    os.path.join("llm", "test_pooling.py"),
    os.path.join("reward_models", "test_served.py"),
    os.path.join("rubrics", "test_elicit_distributed.py"),
    os.path.join("probe", "test_real_rewards.py"),
    os.path.join("probe", "test_exploit_time_bounds.py"),
    os.path.join("probe", "test_bias_reward_model.py"),
})  # fmt: skip


#: Test files outside ``rewards/code`` that run programs in the sandbox.
SANDBOX_ELSEWHERE = frozenset({
    os.path.join("probe", "test_real_rewards.py"),
    os.path.join("rewards", "test_every_reward.py"),
    os.path.join("rewards", "test_options.py"),
    "test_docs.py",
})  # fmt: skip


def pytest_collection_modifyitems(config, items):
    tests = os.path.dirname(__file__)
    for item in items:
        where = os.path.relpath(str(item.path), tests)
        fixtures = set(getattr(item, "fixturenames", ()))
        kinds = set()
        if where.startswith(os.path.join("rewards", "code")):
            kinds.add("sandbox")
        if "sandbox" in kinds or where in SANDBOX_ELSEWHERE:
            # One xdist worker runs every test that starts sandboxes: the hostile suites check
            # that no sandbox process is left on the machine, which another worker's sandbox
            # would break.
            item.add_marker(pytest.mark.xdist_group("sandbox"))
        if fixtures & _MODEL_FIXTURES:
            kinds.add("model")
        if fixtures & _RAY_FIXTURES:
            kinds.add("ray")
        if "grpo" in item.name.lower() or "grpo" in where or "train" in item.name.lower():
            kinds.add("training")
        if kinds or where in SLOW:
            kinds.add("slow")
        for kind in sorted(kinds):
            item.add_marker(kind)


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[char] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", pad_token="<pad>")
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    return tokenizer


@pytest.fixture
def tiny_causal_lm(tiny_tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tiny_tokenizer.pad_token_id,
        eos_token_id=tiny_tokenizer.eos_token_id,
        bos_token_id=tiny_tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config)


def _model_missing() -> str | None:
    from rewardlab.llm.default_model import default_model_path

    try:
        default_model_path()
    except MissingDependency as error:
        return str(error)
    return None


@pytest.fixture(autouse=True)
def _private_judge_cache(tmp_path, monkeypatch):
    """Judges built with the default cache write to this test's folder, not the user's cache."""
    monkeypatch.setattr("rewardlab.llm.client.cache_dir", lambda: tmp_path)


@pytest.fixture
def scripted():
    with ScriptedServer() as server:
        yield server


def openai_backend(url: str, **extra):
    return {"type": "openai", "base_url": url, "model": "scripted", **extra}


def tool_call(name: str, **arguments):
    """One OpenAI-format tool call (an entry of an assistant message's ``tool_calls``), with its
    arguments as a mapping, as TRL's tool loop writes them: the trajectory tests' rollouts."""
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.fixture(scope="session")
def model_available():
    problem = _model_missing()
    if problem and not os.environ.get("CI"):
        pytest.skip(problem)
    assert problem is None, problem


@pytest.fixture(scope="session")
def local_server(model_available):
    """The ``/v1`` address of ``rewardlab serve-model`` running the embedded model."""
    command = [sys.executable, "-m", "rewardlab.cli", "serve-model", "--port", "0", "--name", "smollm2"]
    # stderr to a file: a pipe nobody reads could fill up and block the server.
    with tempfile.TemporaryFile(mode="w+") as errors:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        deadline = time.monotonic() + 300  # the first start converts the GGUF file
        line = ""
        while time.monotonic() < deadline and process.poll() is None:
            ready, _, _ = select.select([process.stdout], [], [], 1.0)
            if ready:
                line = process.stdout.readline()
                if " at http" in line:
                    break
        if " at http" not in line:
            process.kill()
            errors.seek(0)
            raise RuntimeError(f"serve-model did not start: {errors.read()[-2000:]}")
        yield line.rsplit(" at ", 1)[1].strip()
        process.terminate()
        process.wait(timeout=30)

"""Progress advantage and the implicit PRM on two tiny Llamas built from a config (different
seeds) sharing the byte-level test tokenizer, where every character is one token - so a step's
tokens can be counted by hand. Expected values come from each model's own log-probabilities,
computed here by a plain full forward pass of prompt + completion."""

import math

import pytest

from rewardlab import Sample, Status, build
from rewardlab.prm.implicit import ImplicitPRMReward, ProgressAdvantageReward
from rewardlab.prm.models import LoadedModel, check_same_tokenizer

PROMPT = "Q: 2+2?\n"
COMPLETION = "ab\n\ncde\n\nf"  # steps "ab" (tokens 0-3 with the blank line), "cde" (4-8), "f" (9)
STEP_TOKENS = [range(0, 4), range(4, 9), range(9, 10)]


def tiny_llama(tokenizer, seed):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def pair(tiny_tokenizer):
    return (
        LoadedModel(tiny_llama(tiny_tokenizer, 1), tiny_tokenizer, "policy"),
        LoadedModel(tiny_llama(tiny_tokenizer, 2), tiny_tokenizer, "reference"),
    )


def token_logprobs(loaded, prompt, completion, temperature=1.0):
    import torch

    tokenizer = loaded.tokenizer
    prompt_ids = tokenizer(prompt)["input_ids"]
    ids = prompt_ids + tokenizer(completion, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logprobs = torch.log_softmax(loaded.model(torch.tensor([ids])).logits[0] / temperature, dim=-1)
    return [logprobs[position - 1, ids[position]].item() for position in range(len(prompt_ids), len(ids))]


def test_token_counts_are_as_assumed(tiny_tokenizer):
    assert len(tiny_tokenizer(COMPLETION, add_special_tokens=False)["input_ids"]) == len(COMPLETION) == 10


@pytest.mark.parametrize("token_aggregate", ["sum", "mean"])
def test_progress_advantage_aggregates_then_subtracts(pair, token_aggregate):
    policy, reference = pair
    mine, theirs = token_logprobs(policy, PROMPT, COMPLETION), token_logprobs(reference, PROMPT, COMPLETION)

    def fold(values, tokens):
        picked = [values[i] for i in tokens]
        return sum(picked) / (len(picked) if token_aggregate == "mean" else 1)

    expected = [0.5 * (fold(mine, t) - fold(theirs, t)) for t in STEP_TOKENS]
    reward = ProgressAdvantageReward(
        policy=policy, reference=reference, beta=0.5, token_aggregate=token_aggregate, aggregate="min"
    )
    (score,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert score.steps == pytest.approx(expected, abs=1e-5)
    assert score.value == pytest.approx(min(expected), abs=1e-5)
    assert score.details["log_ratio"] == pytest.approx(sum(mine) - sum(theirs), abs=1e-5)
    assert score.details["step_spans"] == [[0, 2], [4, 7], [9, 10]]


def test_the_log_ratio_of_the_distributions_sampled_at_a_temperature(pair):
    """``temperature`` scores both models as TRL's GRPO does at that sampling temperature."""
    policy, reference = pair
    mine = token_logprobs(policy, PROMPT, COMPLETION, temperature=0.7)
    theirs = token_logprobs(reference, PROMPT, COMPLETION, temperature=0.7)
    expected = [sum(mine[i] - theirs[i] for i in tokens) for tokens in STEP_TOKENS]
    reward = ProgressAdvantageReward(policy=policy, reference=reference, temperature=0.7)
    (score,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert score.steps == pytest.approx(expected, abs=1e-5)
    at_one = ProgressAdvantageReward(policy=policy, reference=reference).score(
        [Sample(prompt=PROMPT, completion=COMPLETION)]
    )[0]
    assert at_one.steps != pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(("form", "aggregate"), [("step", "sum"), ("cumulative", "last")])
def test_implicit_prm_step_and_cumulative(pair, form, aggregate):
    policy, reference = pair
    mine, theirs = token_logprobs(policy, PROMPT, COMPLETION), token_logprobs(reference, PROMPT, COMPLETION)
    per_step = [2.0 * sum(mine[i] - theirs[i] for i in t) for t in STEP_TOKENS]
    expected = per_step if form == "step" else [sum(per_step[: k + 1]) for k in range(3)]
    reward = ImplicitPRMReward(policy=policy, reference=reference, beta=2.0, form=form, aggregate=aggregate)
    (score,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert score.steps == pytest.approx(expected, abs=1e-5)
    # Either way the whole trajectory's scaled log-ratio comes out: summed steps, or the last.
    assert score.value == pytest.approx(2.0 * (sum(mine) - sum(theirs)), abs=1e-4)
    # And that outcome reward is the default, for either form: not divided by the step count.
    (default,) = ImplicitPRMReward(policy=policy, reference=reference, beta=2.0, form=form).score(
        [Sample(prompt=PROMPT, completion=COMPLETION)]
    )
    assert default.value == pytest.approx(2.0 * (sum(mine) - sum(theirs)), abs=1e-4)


def test_a_group_shares_its_prompt_and_equals_scoring_one_by_one(pair):
    policy, reference = pair
    completions = ["a\n\nb", "xyz", "1. p\n2. q\n3. r", "Step 1: s\nStep 2: t"]
    samples = [Sample(prompt=PROMPT, completion=c) for c in completions] + [
        Sample(prompt="Other?", completion="o")
    ]
    reward = ProgressAdvantageReward(
        policy=policy, reference=reference, aggregate="mean", batch_tokens=12, chunk_tokens=5
    )
    together = reward.score(samples)
    alone = [reward.score([sample])[0] for sample in samples]
    assert [len(s.steps) for s in together] == [2, 1, 3, 2, 1]
    for a, b in zip(together, alone, strict=True):
        assert a.steps == pytest.approx(b.steps, abs=1e-5)


def test_given_steps_agent_trajectories_and_bad_input(pair, tiny_tokenizer):
    policy, reference = pair
    reward = ImplicitPRMReward(policy=policy, reference=reference)
    trajectory = [
        {"role": "assistant", "content": "call f"},
        {"role": "tool", "content": "42"},
        {"role": "assistant", "content": "it is 42"},
    ]
    given, agent, empty, bad_steps, odd = reward.score(
        [
            Sample(prompt=PROMPT, completion="x=1. y=2.", fields={"steps": ["x=1.", "y=2."]}),
            Sample(prompt=[{"role": "user", "content": "f?"}], completion=trajectory),
            Sample(prompt=PROMPT, completion=""),
            Sample(prompt=PROMPT, completion="x=1.", id="s3", fields={"steps": ["z"]}),
            Sample(prompt=PROMPT, completion=5),
        ]
    )
    assert len(given.steps) == 2 and given.details["step_spans"] == [[0, 4], [5, 9]]
    # Template "role: content\n": the steps are the two assistant turns, the tool's turn context.
    assert len(agent.steps) == 2, agent
    assert empty.status is Status.INVALID_INPUT and "completion: no steps" in empty.reason
    assert bad_steps.status is Status.INVALID_INPUT and bad_steps.reason.startswith(
        "sample 's3': steps: step 1"
    )
    assert odd.status is Status.INVALID_INPUT and "completion" in odd.reason


def test_truncation_is_reported_never_silent(pair):
    policy, reference = pair
    reward = ProgressAdvantageReward(policy=policy, reference=reference, max_tokens=len(PROMPT) + 6)
    (cut,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    # 6 completion tokens read: step 1 (tokens 0-3) whole, step 2 (4-8) cut -> one step scored.
    assert len(cut.steps) == 1 and cut.details["truncated"] == {"scored_steps": 1, "total_steps": 3}
    assert "truncated: 1 of 3 steps" in cut.reason
    reward = ProgressAdvantageReward(policy=policy, reference=reference, max_tokens=len(PROMPT) + 2)
    (none,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert none.status is Status.INVALID_INPUT and "first step does not fit" in none.reason


def test_models_load_from_folders_and_tokenizers_must_match(pair, tmp_path, tiny_tokenizer):
    policy, reference = pair
    for name, loaded in (("policy", policy), ("reference", reference)):
        loaded.model.save_pretrained(tmp_path / name)
        tiny_tokenizer.save_pretrained(tmp_path / name)
    reward = build(
        {
            "type": "progress_advantage",
            "policy": str(tmp_path / "policy"),
            "reference": str(tmp_path / "reference"),
        }
    )
    in_memory = ProgressAdvantageReward(policy=policy, reference=reference)
    sample = Sample(prompt=PROMPT, completion=COMPLETION)
    assert reward.score([sample])[0].steps == pytest.approx(in_memory.score([sample])[0].steps, abs=1e-5)

    other = tiny_tokenizer.__class__(tokenizer_object=tiny_tokenizer.backend_tokenizer, eos_token="<eos>")
    other.add_tokens(["<extra>"])
    with pytest.raises(ValueError, match="different tokenizers"):
        check_same_tokenizer(policy, LoadedModel(reference.model, other, "odd"))
    with pytest.raises(FileNotFoundError, match="the hub is not used"):
        ProgressAdvantageReward(policy=str(tmp_path / "missing")).score([sample])


def test_bad_options_fail_at_build_time():
    with pytest.raises(ValueError, match="beta"):
        ProgressAdvantageReward(policy="p", beta=0)
    with pytest.raises(ValueError, match="temperature"):
        ProgressAdvantageReward(policy="p", temperature=-1)
    with pytest.raises(ValueError, match="temperature"):
        ProgressAdvantageReward(policy="p", temperature="hot")
    with pytest.raises(ValueError, match="token_aggregate"):
        ProgressAdvantageReward(policy="p", token_aggregate="max")
    with pytest.raises(ValueError, match="form"):
        ImplicitPRMReward(policy="p", form="total")
    with pytest.raises(ValueError, match="aggregate"):
        ImplicitPRMReward(policy="p", aggregate="median")
    assert math.isfinite(ImplicitPRMReward(policy="p").beta)


def test_through_the_trl_adapter(pair):
    from rewardlab.integrations.trl import as_reward_func

    policy, reference = pair
    reward = ImplicitPRMReward(policy=policy, reference=reference, aggregate="min")
    func = as_reward_func(reward)
    completions = [COMPLETION, "xy\n\nz"]
    values = func(prompts=[PROMPT, PROMPT], completions=completions, completion_ids=[[1], [2]])
    direct = reward.score([Sample(prompt=PROMPT, completion=c) for c in completions])
    assert values == pytest.approx([s.value for s in direct], abs=1e-6)


def test_tool_results_belong_to_no_step_and_a_step_ending_at_the_cut_counts(pair, tiny_tokenizer):
    from rewardlab.prm.trajectory import tokenize_sample
    from rewardlab.rewards.steps import StepOptions

    policy, reference = pair
    trajectory = [
        {"role": "assistant", "content": "call f"},
        {"role": "tool", "content": "42"},
        {"role": "assistant", "content": "it is 42"},
    ]
    sample = Sample(prompt=[{"role": "user", "content": "f?"}], completion=trajectory)
    tokenized = tokenize_sample(sample, tiny_tokenizer, StepOptions())
    text = tokenized.completion_text
    tool = text.index("tool: 42")
    # One character, one token: the tool's turn is context, owned by no step.
    assert set(tokenized.owners[tool : tool + len("tool: 42")]) == {-1}
    (agent,) = ImplicitPRMReward(policy=policy, reference=reference, aggregate="sum").score([sample])
    assert agent.value == pytest.approx(agent.details["log_ratio"], abs=1e-5)
    # COMPLETION's first step is tokens 0-3: with exactly 4 completion tokens read, it is whole.
    reward = ProgressAdvantageReward(policy=policy, reference=reference, max_tokens=len(PROMPT) + 4)
    (cut,) = reward.score([Sample(prompt=PROMPT, completion=COMPLETION)])
    assert len(cut.steps) == 1 and cut.details["truncated"]["scored_steps"] == 1


def test_a_lone_assistant_message_is_split_into_steps_like_text(pair, tiny_tokenizer):
    from rewardlab.prm.trajectory import step_texts, tokenize_sample
    from rewardlab.rewards.steps import StepOptions

    # What TRL passes for a conversational dataset: the completion is one assistant message.
    chat = [{"role": "assistant", "content": "x = 1\ny = 2\nso 3"}]
    sample = Sample(prompt=[{"role": "user", "content": "sum?"}], completion=chat)
    options = StepOptions(split="lines")
    assert step_texts(sample, options) == ["x = 1", "y = 2", "so 3"]
    trajectory = tokenize_sample(sample, tiny_tokenizer, options)
    text = trajectory.completion_text
    assert [text[start:end] for start, end in trajectory.spans] == ["x = 1", "y = 2", "so 3"]
    # The template's "assistant: " header and closing newline are no step's; each newline
    # between steps goes to the step before it (one character per token in this tokenizer).
    header = text.index("x = 1")
    assert set(trajectory.owners[:header]) == {-1} and trajectory.owners[-1] == -1
    assert trajectory.owners[header : header + 6] == (0,) * 6
    assert trajectory.owners[header + 6 : header + 12] == (1,) * 6

    policy, reference = pair
    reward = ProgressAdvantageReward(policy=policy, reference=reference, steps={"split": "lines"})
    (scored,) = reward.score([sample])
    assert len(scored.steps) == 3
    # A trajectory with a tool call keeps one step per assistant action.
    call = [{"role": "assistant", "content": "x = 1\ny = 2", "tool_calls": [{"id": "1"}]}]
    assert step_texts(Sample(prompt="p", completion=call), options) == ["x = 1\ny = 2"]

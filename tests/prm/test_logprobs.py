"""The shared-prompt scorer against a plain full forward pass, under budgets that force every
path: batches of one and of many, the body in pieces through the cache, the head in chunks, and
the whole-model path for heads that are more than a projection."""

import random

import pytest
import torch

from rewardlab.prm.logprobs import ScoringBudget, TokenLogprobScorer


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512,
    )  # fmt: skip
    return LlamaForCausalLM(config).eval()


def plain(model, prompt, completion, temperature=1.0):
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0]
        logprobs = torch.log_softmax(logits / temperature, dim=-1)
    return [logprobs[len(prompt) - 1 + j, token].item() for j, token in enumerate(completion)]


def run_counting_tokens(model, run):
    """``run()``'s result and how many tokens it fed through ``model``'s body."""
    fed = []
    hook = model.model.register_forward_pre_hook(
        lambda module, args, kwargs: fed.append(kwargs["input_ids"].numel()), with_kwargs=True
    )
    try:
        return run(), sum(fed)
    finally:
        hook.remove()


BUDGETS = [
    ScoringBudget(),
    ScoringBudget(batch_tokens=60, chunk_tokens=7),
    ScoringBudget(batch_tokens=1, chunk_tokens=1),
    ScoringBudget(batch_tokens=100, chunk_tokens=3, body_tokens=10),
    ScoringBudget(batch_tokens=200, chunk_tokens=5, max_padding=0.9),
]


@pytest.mark.parametrize(
    "budget", BUDGETS, ids=["default", "small-batches", "one-by-one", "body-in-pieces", "padded"]
)
@pytest.mark.parametrize("whole_model", [False, True], ids=["split-head", "whole-model"])
def test_equal_to_a_plain_forward_pass(model, budget, whole_model):
    rng = random.Random(0)
    prompt = [rng.randrange(300) for _ in range(37)]
    completions = [[rng.randrange(300) for _ in range(n)] for n in (5, 50, 1, 0, 23, 23)]
    scorer = TokenLogprobScorer(model, budget)
    if whole_model:
        scorer._split = False  # as for a model whose head soft-caps or scales its logits
    scored = scorer.completion_logprobs(prompt, completions)
    assert [len(values) for values in scored] == [5, 50, 1, 0, 23, 23]
    for values, completion in zip(scored, completions, strict=True):
        assert values == pytest.approx(plain(model, prompt, completion), abs=1e-5)


@pytest.mark.parametrize("whole_model", [False, True], ids=["split-head", "whole-model"])
def test_at_a_temperature_the_logits_are_divided_by_it(model, whole_model):
    """The distribution sampled at temperature T (as TRL's GRPO scores its policy and reference):
    ``log_softmax(logits / T)``, through the prompt's last logits and the completion's."""
    rng = random.Random(1)
    prompt = [rng.randrange(300) for _ in range(20)]
    completions = [[rng.randrange(300) for _ in range(n)] for n in (9, 4)]
    scorer = TokenLogprobScorer(model, ScoringBudget(chunk_tokens=3), temperature=0.4)
    if whole_model:
        scorer._split = False
    scored = scorer.completion_logprobs(prompt, completions)
    for values, completion in zip(scored, completions, strict=True):
        assert values == pytest.approx(plain(model, prompt, completion, 0.4), abs=1e-5)
        assert values != pytest.approx(plain(model, prompt, completion), abs=1e-3)
    with pytest.raises(ValueError, match="temperature"):
        TokenLogprobScorer(model, temperature=0.0)


@pytest.mark.parametrize("whole_model", [False, True], ids=["split-head", "whole-model"])
def test_completions_that_open_alike_share_their_opening(model, whole_model):
    """One at a time, a completion continues from the one before it cut back to their shared
    opening: the values still equal a plain pass, and the shared tokens run once."""
    rng = random.Random(1)
    prompt = [rng.randrange(300) for _ in range(11)]
    opening = [rng.randrange(300) for _ in range(20)]
    tails = [[rng.randrange(300) for _ in range(n)] for n in (7, 3, 12)]
    completions = [
        opening + tails[0],
        opening + tails[1],
        opening[:5] + tails[2],
        opening + tails[0],  # a duplicate
        opening[:20],  # the opening alone: a prefix of others
        tails[2],
    ]
    scorer = TokenLogprobScorer(model, ScoringBudget(batch_tokens=1, chunk_tokens=4, body_tokens=9))
    if whole_model:
        scorer._split = False
    scored, fed = run_counting_tokens(model, lambda: scorer.completion_logprobs(prompt, completions))
    for values, completion in zip(scored, completions, strict=True):
        assert values == pytest.approx(plain(model, prompt, completion), abs=1e-5)
    # In token order (the seed's): tails[2] (12 tokens), opening[:5] + tails[2] (17: it shares
    # nothing with tails[2]), the opening (15 new + the fifth again), opening + tails[1] (3 + 1),
    # opening + tails[0] (7 + 1) and its duplicate (nothing).
    completion_tokens = 12 + 17 + 16 + 4 + 8
    assert fed - len(prompt) == completion_tokens < sum(len(c) for c in completions)


@pytest.mark.parametrize(
    "budget",
    [ScoringBudget(batch_tokens=1, chunk_tokens=4, body_tokens=9), ScoringBudget(batch_tokens=64)],
    ids=["one-at-a-time", "batched"],
)
def test_prompts_that_open_alike_share_their_opening(model, budget):
    """Prompts go in token order, each continuing from the one before cut back to what they
    share (a prompt all shared runs its last token again, for its logits); a group that fails
    holds its error in its place and the prompt after it starts afresh."""
    rng = random.Random(2)
    shots = [rng.randrange(300) for _ in range(30)]  # few-shot examples, say
    questions = [[rng.randrange(300) for _ in range(n)] for n in (4, 6)]
    groups = [
        (shots + questions[1], [[1, 2, 3], [4, 5]]),
        (shots + questions[0], [[6, 7]]),
        ([], [[8]]),  # fails: no prompt
        (shots, [[9, 10, 11, 12]]),  # a prefix of the others
        (questions[0], [[13]]),
        (shots + questions[0], [[14]]),  # the same prompt again: its last token runs again
    ]
    scorer = TokenLogprobScorer(model, budget)
    results, fed = run_counting_tokens(model, lambda: scorer.grouped_logprobs(groups))
    assert isinstance(results[2], ValueError)
    for (prompt, completions), scored in zip(groups, results, strict=True):
        if prompt:
            assert scored == [pytest.approx(plain(model, prompt, c), abs=1e-5) for c in completions]
    # Prompt tokens run: the shots once (30, sorted before the prompts they open), what each
    # adds to them - questions[0] (4), questions[1] (6), the repeated prompt's last token (1) -
    # and questions[0] alone (4: it shares nothing); the empty prompt fails before running.
    prompt_tokens = 30 + 4 + 6 + 1 + 4
    completion_tokens = 4 + 2 + 1 + 5 + 1
    assert fed == prompt_tokens + completion_tokens < sum(len(p) for p, _ in groups) + completion_tokens


def test_a_prompt_needs_a_token(model):
    with pytest.raises(ValueError, match="the prompt has no tokens"):
        TokenLogprobScorer(model).completion_logprobs([], [[1]])
    with pytest.raises(ValueError, match="positive"):
        ScoringBudget(chunk_tokens=0)
    with pytest.raises(ValueError, match="max_padding"):
        ScoringBudget(max_padding=1.0)


def test_a_head_that_scales_its_logits_is_detected_and_handled():
    from transformers import GraniteConfig, GraniteForCausalLM

    torch.manual_seed(1)
    config = GraniteConfig(
        vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, logits_scaling=4.0,
    )  # fmt: skip
    granite = GraniteForCausalLM(config).eval()
    scorer = TokenLogprobScorer(granite, ScoringBudget(chunk_tokens=7))
    assert scorer._split is False  # the head divides by logits_scaling: not a plain projection
    prompt, completion = [5, 6, 7], [8, 9, 10, 11]
    assert scorer.completion_logprobs(prompt, [completion])[0] == pytest.approx(
        plain(granite, prompt, completion), abs=1e-5
    )

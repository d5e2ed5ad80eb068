"""No completion can make a rule reward's own check slow: every rule reward, run inline (the
worker budget is the safety net, not the bound), on adversarial text, on real completions
stretched to hundreds of kilobytes, and on random text from hypothesis.

Two assertions per case, generous enough for a loaded two-core CI machine and strict enough to
catch what matters: the check ends well within the per-sample budget, and four times the text
costs at most about four times the time (a quadratic scan costs sixteen).
"""

import gzip
import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewardlab import Sample, build
from tests.adversarial_text import CATALOGUE, repeated

ROOT = Path(__file__).resolve().parents[2]
SIZE = 50_000
#: Seconds one check may take on 200 KB of text: within the default sample budget (5 s), with
#: room for a busy CI machine. Instruction checks are the slowest (a sentence count tokenizes the
#: whole text): 0.3 s for 200 KB of restated lines on a quiet machine here, once each mode's
#: texts were checked once (it was 3.4 s, and 4.1 s in a CI run, when every loose variant was).
#: Growth is checked apart, against the same check on a quarter of the text.
BOUND_S = 4.0

RULE_REWARDS = {
    # The CAS has its own budget (it runs in killable workers); here only the reading is timed,
    # so an answer only the CAS could settle would be a parse_error: the references are numbers.
    "math_answer": {"use_cas": False},
    "think_answer_format": {},
    "regex_match": {"pattern": r"answer: (\d+)", "flags": ["IGNORECASE"], "max_chars": 10**6},
    "string_match": {"extract": "last_line"},
    "json_schema": {"schema": {"type": "object", "required": ["a"]}},
    "instruction_following": {},
    "soft_overlong": {"max_length": 100, "cache_length": 20, "unit": "words"},
    "repetition_penalty": {},
    "length": {"mode": "below_max", "max_length": 100, "unit": "chars"},
}
FIELDS = {
    "instruction_id_list": [
        "punctuation:no_comma",
        "length_constraints:number_sentences",
        "length_constraints:number_words",
        "detectable_format:number_bullet_lists",
        "change_case:english_lowercase",
        "keywords:frequency",
    ],
    "kwargs": [
        {},
        {"num_sentences": 3, "relation": "less than"},
        {"num_words": 50, "relation": "at least"},
        {"num_bullets": 2},
        {},
        {"keyword": "answer", "frequency": 2, "relation": "at least"},
    ],
}


def _rewards():
    built = {}
    for kind, options in RULE_REWARDS.items():
        config = {"type": kind, **options}
        if kind not in ("soft_overlong", "repetition_penalty", "length"):
            config["execution"] = "inline"
        built[kind] = build(config)
        built[kind].score([Sample(completion="warm up, once.", reference="5", fields=FIELDS)])
    return built


REWARDS = _rewards()
# What model text made slow scans before, and what the math reader looks for.
MATH_TEXT = {
    "answer_phrases": lambda size: repeated("The answer is 5. ", size),
    "labels": lambda size: repeated("Answer: 5\nA: 6\n#### 7\n", size),
    "money": lambda size: repeated("It costs $5 and $6 = $", size),
    "unit_words": lambda size: "5 " + repeated("profit misunderstanding ", size),
    "retractions": lambda size: "\\boxed{5}" + repeated(" Wait, actually no, that is wrong.", size),
    "comments": lambda size: repeated("<!-- \\boxed{5} ", size),
    "nested_boxes": lambda size: repeated("\\boxed{\\boxed{", size),
    "dollar_spans": lambda size: repeated("$x$ $ $y $", size),
    "conclusions": lambda size: repeated("Therefore, it is not 5 but more than 6. ", size),
}
TEXTS = {**CATALOGUE, **MATH_TEXT}


def _real_completions() -> str:
    """The longest real completions of the shipped corpus, joined: real prose, LaTeX and boxes."""
    with gzip.open(ROOT / "perf/data/math_real_outputs.jsonl.gz", "rt") as lines:
        completions = sorted({json.loads(line)["completion"] for line in lines}, key=len)
    return "\n\n".join(completions[-40:])


TEXTS["real_completions"] = lambda size: repeated(_real_completions(), size)[:size]


def seconds(reward, text: str, runs: int = 1) -> float:
    """The shortest of ``runs`` timings of one sample's score, which must be an ok value."""
    sample = Sample(prompt="Answer the question.", completion=text, reference="5", fields=FIELDS)
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        (score,) = reward.score([sample])
        timings.append(time.perf_counter() - started)
        assert score.ok, (score.status, score.reason)
    return min(timings)


@pytest.mark.parametrize("kind", sorted(RULE_REWARDS))
@pytest.mark.parametrize("text_name", sorted(TEXTS))
def test_checks_are_bounded_and_linear(kind, text_name):
    reward = REWARDS[kind]
    make = TEXTS[text_name]
    small = seconds(reward, make(SIZE), runs=2)
    large = seconds(reward, make(4 * SIZE), runs=2)
    assert large < BOUND_S, (kind, text_name, small, large)
    assert large < 8 * small + 0.25, (kind, text_name, small, large)


MARKERS = [
    "\\boxed{", "}", "{", "$", "$$", "\\(", "\\)", "\\[", "\\]", "<think>", "</think>", "<answer>",
    "</answer>", "####", "A:", "Answer:", "The answer is", "Therefore,", " not ", " or ", "Wait,",
    "```", "~~~", "<!--", "-->", "%", "<<", ">>", "\\frac{", "\\text{", "=", "\n", "\n\n", " ", "5",
    "-3.25", "1,000", "½", "\u200b", "<|channel|>final<|message|>", "I hope this helps!",
]  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(MARKERS) | st.text(max_size=8), max_size=400))
def test_random_model_text_ends_at_once(pieces):
    text = "".join(pieces)
    for kind, reward in REWARDS.items():
        assert seconds(reward, text) < 0.5, kind

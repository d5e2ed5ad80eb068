import math
import random

import langdetect
import nltk
import pytest

import rewardlab
from rewardlab import ConfigError, Sample, Status
from rewardlab.rewards.instructions import InstructionFollowingReward

# The argument names of a row of the Hugging Face google/IFEval dataset: every row carries all of
# them, None where its instructions do not use them.
IFEVAL_ARGUMENT_NAMES = [
    "num_highlights", "relation", "num_words", "num_placeholders", "prompt_to_repeat", "num_paragraphs",
    "num_bullets", "section_spliter", "num_sections", "capital_relation", "capital_frequency", "keywords",
    "end_phrase", "forbidden_words", "keyword", "frequency", "num_sentences", "postscript_marker",
    "first_word", "nth_paragraph", "language", "let_relation", "letter", "let_frequency",
]  # fmt: skip


def ifeval_row_arguments(**used):
    return {**dict.fromkeys(IFEVAL_ARGUMENT_NAMES), **used}


def row(completion, ids, kwargs=None, **sample_options):
    fields = {"instruction_id_list": ids}
    if kwargs is not None:
        fields["kwargs"] = kwargs
    return Sample(completion=completion, fields=fields, **sample_options)


def score_one(reward, sample):
    (score,) = reward.score([sample])
    return score


NO_COMMA_AND_SHORT = (
    ["punctuation:no_comma", "length_constraints:number_words"],
    [{}, {"num_words": 5, "relation": "less than"}],
)


def test_fraction_and_breakdown():
    score = score_one(InstructionFollowingReward(), row("Hello world, twice.", *NO_COMMA_AND_SHORT))
    # "Hello world, twice." has a comma (fails) and 3 words < 5 (passes).
    assert (score.status, score.value) == (Status.OK, 0.5)
    assert score.breakdown == {"punctuation:no_comma": 0.0, "length_constraints:number_words": 1.0}
    assert score.details["failed"] == ["punctuation:no_comma"]
    assert score.reason == "not met: punctuation:no_comma"


def test_all_or_nothing():
    reward = InstructionFollowingReward(aggregate="all_or_nothing")
    partly, fully = reward.score(
        [row("Hello world, twice.", *NO_COMMA_AND_SHORT), row("Hello world.", *NO_COMMA_AND_SHORT)]
    )
    assert (partly.value, fully.value) == (0.0, 1.0)
    assert fully.reason is None and fully.details["failed"] == []


def test_loose_mode_forgives_a_preamble_line():
    sample = row("Sure, here it is:\nno commas in this line at all", ["punctuation:no_comma"])
    assert score_one(InstructionFollowingReward(mode="strict"), sample).value == 0.0
    assert score_one(InstructionFollowingReward(mode="loose"), sample).value == 1.0


def test_hugging_face_rows_with_none_arguments():
    kwargs = [
        ifeval_row_arguments(),
        ifeval_row_arguments(num_words=5, relation="less than"),
        ifeval_row_arguments(keywords=["paris", "rome"]),
    ]
    ids = ["punctuation:no_comma", "length_constraints:number_words", "keywords:existence"]
    score = score_one(InstructionFollowingReward(), row("Paris and Rome.", ids, kwargs))
    assert (score.status, score.value) == (Status.OK, 1.0)
    # NaN is how a None comes back from a pandas numeric column.
    nan_row = [{**kwargs[1], "num_highlights": math.nan}]
    assert (
        score_one(InstructionFollowingReward(), row("Four words right here.", ids[1:2], nan_row)).value == 1.0
    )


def test_unknown_instruction_id_is_invalid_input_not_skipped():
    sample = row("Hello world.", ["punctuation:no_comma", "punctuation:no_coma"], [{}, {}], id="row-12")
    score = score_one(InstructionFollowingReward(), sample)
    assert score.status is Status.INVALID_INPUT and score.value is None
    assert "sample 'row-12'" in score.reason and "'punctuation:no_coma'" in score.reason
    assert "fields.instruction_id_list" in score.reason
    ifbench_id = row("Hello.", ["count:word_count_range"], [{"min_words": 1, "max_words": 3}])
    assert (
        score_one(InstructionFollowingReward(benchmark="ifeval"), ifbench_id).status is Status.INVALID_INPUT
    )


def test_missing_argument_is_invalid_input_not_random():
    sample = row("Hello world.", ["length_constraints:number_words"], [{"num_words": 5}], id="r")
    score = score_one(InstructionFollowingReward(), sample)
    assert score.status is Status.INVALID_INPUT
    assert "fields.kwargs" in score.reason and "relation" in score.reason and "random" in score.reason
    no_kwargs_field = row("Hello world.", ["length_constraints:number_words"])
    assert score_one(InstructionFollowingReward(), no_kwargs_field).status is Status.INVALID_INPUT
    # Instructions without arguments need no kwargs field.
    assert score_one(InstructionFollowingReward(), row("Hello world.", ["punctuation:no_comma"])).value == 1.0


@pytest.mark.parametrize(
    ("instruction_id", "kwargs", "named"),
    [
        ("length_constraints:number_words", {"relation": "at least", "num_words": -5}, "num_words=-5"),
        ("detectable_format:number_bullet_lists", {"num_bullets": -3}, "num_bullets=-3"),
        (
            "keywords:frequency",
            {"relation": "at least", "keyword": "word", "frequency": -2},
            "frequency=-2",
        ),
    ],
)
def test_a_negative_count_is_invalid_input_not_random(instruction_id, kwargs, named):
    # IFEval draws a random count for a negative one ("unset"): the row would be checked against a
    # number nobody wrote, a new one each time.
    before = random.getstate()
    sample = row("word " * 120, [instruction_id], [kwargs], id="neg")
    score = score_one(InstructionFollowingReward(), sample)
    assert score.status is Status.INVALID_INPUT and score.value is None
    assert "sample 'neg'" in score.reason and "fields.kwargs" in score.reason and named in score.reason
    assert random.getstate() == before
    valid = dict(kwargs, **{named.split("=")[0]: 3})
    assert score_one(InstructionFollowingReward(), row("word " * 120, [instruction_id], [valid])).ok


@pytest.mark.parametrize(
    ("fields", "field_named"),
    [
        ({"kwargs": [{}]}, "fields.instruction_id_list"),
        ({"instruction_id_list": [], "kwargs": []}, "fields.instruction_id_list"),
        ({"instruction_id_list": "punctuation:no_comma"}, "fields.instruction_id_list"),
        ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]}, "fields.kwargs"),
        ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": ["num_words=3"]}, "fields.kwargs"),
        (
            {
                "instruction_id_list": ["length_constraints:number_words"],
                "kwargs": [{"num_words": 3, "relation": "about"}],
            },
            "fields.kwargs",
        ),
        (
            {
                "instruction_id_list": ["punctuation:no_comma"],
                "kwargs": [{"num_words": 3}],
            },  # takes no arguments
            "fields.kwargs",
        ),
    ],
)
def test_malformed_rows_are_invalid_input(fields, field_named):
    score = score_one(InstructionFollowingReward(), Sample(completion="Hello.", id="bad", fields=fields))
    assert score.status is Status.INVALID_INPUT
    assert "sample 'bad'" in score.reason and field_named in score.reason


def test_sentence_counting_works_offline():
    from if_verifiable.ifeval import instructions_util

    assert instructions_util.count_sentences("Dr. Smith arrived. He sat down.") == 2
    text = "Dr. Smith arrived. He sat down."
    ids = ["length_constraints:number_sentences"]
    fewer_than_3 = score_one(
        InstructionFollowingReward(), row(text, ids, [{"num_sentences": 3, "relation": "less than"}])
    )
    at_least_3 = score_one(
        InstructionFollowingReward(), row(text, ids, [{"num_sentences": 3, "relation": "at least"}])
    )
    assert (fewer_than_3.value, at_least_3.value) == (1.0, 0.0)


def test_word_tokenizing_checks_work_offline():
    ids = ["change_case:capital_word_frequency"]
    kwargs = [{"capital_frequency": 2, "capital_relation": "at least"}]
    reward = InstructionFollowingReward()
    # Capitalised words: THE and CAT (2), then only CAT (1).
    assert [
        s.value
        for s in reward.score([row("THE CAT sat. It slept.", ids, kwargs), row("The CAT sat.", ids, kwargs)])
    ] == [
        1.0,
        0.0,
    ]


def test_language_detection_is_seeded_and_deterministic():
    assert langdetect.DetectorFactory.seed == 0
    ids = ["language:response_language"]
    spanish = row("El gato duerme en la casa todo el día.", ids, [{"language": "es"}])
    assert score_one(InstructionFollowingReward(), spanish).value == 1.0
    short_text = row("ok si no", ids, [{"language": "es"}])
    values = {score_one(InstructionFollowingReward(), short_text).value for _ in range(10)}
    assert len(values) == 1


def test_empty_completion_is_an_ok_zero():
    reward = InstructionFollowingReward()
    empty, unclosed, only_thinking = reward.score(
        [
            row("  ", *NO_COMMA_AND_SHORT),
            row("<think>still thinking", *NO_COMMA_AND_SHORT),
            row("<think>done thinking</think>  ", *NO_COMMA_AND_SHORT),
        ]
    )
    for score in (empty, unclosed, only_thinking):
        assert (score.status, score.value) == (Status.OK, 0.0)
        assert score.breakdown == {"punctuation:no_comma": 0.0, "length_constraints:number_words": 0.0}
    assert empty.reason == "empty response"
    assert "<think> opens at character 0 and never closes" in unclosed.reason
    assert only_thinking.reason == "no response outside reasoning"


def test_constraints_are_checked_on_the_response_not_the_reasoning():
    reward = InstructionFollowingReward()
    # Commas in the reasoning are not the response's; the second reasoning block would have been
    # read as response by a grader that only drops text up to the first </think>.
    (score,) = reward.score(
        [row("<think>a, b</think>No commas here.<think>c, d</think>", *NO_COMMA_AND_SHORT)]
    )
    assert score.value == 1.0, score.reason


def test_thinking_block_is_not_checked():
    sample = row("<think>Hmm, commas, commas.</think>No commas here.", ["punctuation:no_comma"])
    assert score_one(InstructionFollowingReward(), sample).value == 1.0


def test_chat_completion_and_prompt_repetition():
    prompt = [{"role": "user", "content": "Write a haiku about rain"}]
    completion = [{"role": "assistant", "content": "Write a haiku about rain\nSoft rain on the roof"}]
    sample = Sample(
        prompt=prompt,
        completion=completion,
        fields={
            "instruction_id_list": ["combination:repeat_prompt"],
            "kwargs": [{"prompt_to_repeat": "Write a haiku about rain"}],
        },
    )
    assert score_one(InstructionFollowingReward(), sample).value == 1.0


def test_repeated_ids_get_distinct_breakdown_keys():
    ids = ["keywords:existence", "keywords:existence"]
    kwargs = [{"keywords": ["rain"]}, {"keywords": ["snow"]}]
    score = score_one(InstructionFollowingReward(), row("Rain today.", ids, kwargs))
    assert score.breakdown == {"keywords:existence": 1.0, "keywords:existence#2": 0.0}
    assert score.value == 0.5


def test_ifbench_constraints():
    reward = InstructionFollowingReward(benchmark="ifbench")
    ids, kwargs = ["count:word_count_range"], [{"min_words": 2, "max_words": 4}]
    assert [
        s.value for s in reward.score([row("three words here", ids, kwargs), row("one", ids, kwargs)])
    ] == [1.0, 0.0]
    unknown_in_ifbench = row("x", ["punctuation:no_comma"], [{}])
    assert score_one(reward, unknown_in_ifbench).status is Status.INVALID_INPUT


def test_ifbench_check_needing_absent_nltk_data_is_an_error_naming_it():
    try:
        nltk.data.find("corpora/stopwords")
    except LookupError:
        pass
    else:
        pytest.skip("NLTK stopwords are installed here")
    sample = row("The cat is on the mat.", ["ratio:stop_words"], [{"percentage": 50}], id="sw")
    score = score_one(InstructionFollowingReward(benchmark="ifbench"), sample)
    assert score.status is Status.ERROR and score.value is None
    assert (
        "sample 'sw'" in score.reason and "ratio:stop_words" in score.reason and "'stopwords'" in score.reason
    )


def test_build_instruction_following():
    config = {"type": "instruction_following", "aggregate": "all_or_nothing", "mode": "loose"}
    reward = rewardlab.build(config)
    assert isinstance(reward, InstructionFollowingReward)
    assert reward.name == "instruction_following"
    assert score_one(reward, row("Hello world.", *NO_COMMA_AND_SHORT)).value == 1.0
    with pytest.raises(ConfigError, match="benchmark"):
        rewardlab.build({"type": "instruction_following", "benchmark": "ifeval2"})


def test_the_whole_response_is_constrained_not_an_answer_block_or_a_lookalike():
    reward = InstructionFollowingReward()
    no_comma = (["punctuation:no_comma"], [{}])
    stub, full_width = reward.score(
        [
            row("One, two, three.\n<answer>no commas here</answer>", *no_comma),
            row("One\uff0c two", *no_comma),
        ]
    )
    assert (stub.value, full_width.value) == (0.0, 0.0)


def test_a_format_pattern_naming_removed_markers_is_refused():
    from rewardlab.rewards.format import RegexMatchReward

    with pytest.raises(ValueError, match="answer_region: whole"):
        RegexMatchReward(r"<think>.*</think>")
    assert RegexMatchReward(r"<think>.*</think>", answer_region="whole").pattern


AGREEMENT_INSTRUCTIONS = [
    ("punctuation:no_comma", {}),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "less than"}),
    ("length_constraints:number_words", {"num_words": 8, "relation": "at least"}),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 1}),
    ("change_case:english_lowercase", {}),
    ("startend:end_checker", {"end_phrase": "Is there anything else?"}),
    ("detectable_format:title", {}),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Say hi."}),
]
AGREEMENT_TEXTS = [
    "Sure, here it is:\nno commas in this line at all",
    "hello there. this is short",
    "**Title**\n*one* highlighted, two. three. four.\nIs there anything else?",
    "<think>Plan, then answer.</think>\n<<Greeting>>\nsay hi. more text here, and more words",
    "Say hi. Then *again*.\nIs there anything else?\nP.S. bye",
    "One line only",
]


@pytest.mark.parametrize("mode", ["strict", "loose"])
def test_agrees_with_if_verifiable_on_each_mode(mode):
    # The reward checks only the texts its mode reads; its verdicts must be the reference's.
    from if_verifiable.common import evaluate_instructions

    reward = InstructionFollowingReward(mode=mode)
    registry = rewardlab.rewards.instructions._REGISTRIES["ifeval"]
    for text in AGREEMENT_TEXTS:
        for instruction_id, kwargs in AGREEMENT_INSTRUCTIONS:
            (result,), _ = evaluate_instructions(text, [instruction_id], [kwargs], "Say hi.", registry)
            expected = result.strict_pass if mode == "strict" else result.loose_pass
            sample = row(text, [instruction_id], [kwargs], prompt="Say hi.")
            assert score_one(reward, sample).value == float(expected), (mode, instruction_id, text)

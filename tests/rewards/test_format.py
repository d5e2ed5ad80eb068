import pytest

import rewardlab
from rewardlab import ConfigError, Sample, Status
from rewardlab.rewards.format import (
    RegexMatchReward,
    StringMatchReward,
    ThinkAnswerFormatReward,
    boxed_answer,
    normalize_answer,
)


def score_one(reward, sample):
    (score,) = reward.score([sample])
    return score


# ThinkAnswerFormatReward


def test_r1_format_scores_one():
    score = score_one(
        ThinkAnswerFormatReward(), Sample(completion="<think>\n2+2=4\n</think>\n<answer>4</answer>\n")
    )
    assert score.status is Status.OK
    assert score.value == 1.0
    assert score.details["failed_rule"] is None


@pytest.mark.parametrize(
    ("completion", "rule"),
    [
        ("The answer is 4.", "one_think_block"),
        ("<think>a</think><think>b</think><answer>4</answer>", "one_think_block"),
        ("</think>a<think><answer>4</answer>", "think_order"),
        ("<think>a</think>", "one_answer_block"),
        ("<think>a</think><answer>4</answer><answer>5</answer>", "one_answer_block"),
        ("<think>a</think></answer>4<answer>", "answer_order"),
        ("<think>a<answer>4</answer></think>", "answer_after_think"),
        ("<answer>4</answer><think>a</think>", "answer_after_think"),
        ("Sure! <think>a</think><answer>4</answer>", "text_before_think"),
        ("<think>a</think> so <answer>4</answer>", "text_between_blocks"),
        ("<think>a</think><answer>4</answer> Hope this helps", "text_after_answer"),
        ("<think>a</think><answer>  </answer>", "empty_answer"),
    ],
)
def test_each_broken_rule_is_named(completion, rule):
    score = score_one(ThinkAnswerFormatReward(), Sample(completion=completion))
    assert score.status is Status.OK  # a malformed completion is the model's failure, not an error
    assert score.value == 0.0
    assert score.details["failed_rule"] == rule
    assert score.reason


def test_allow_text_outside_still_checks_the_tags():
    reward = ThinkAnswerFormatReward(allow_text_outside=True)
    relaxed = score_one(reward, Sample(completion="Sure! <think>a</think> so <answer>4</answer> Bye."))
    assert relaxed.value == 1.0
    nested = score_one(reward, Sample(completion="Sure! <think>a<answer>4</answer></think>"))
    assert (nested.value, nested.details["failed_rule"]) == (0.0, "answer_after_think")


def test_without_answer_tag_behaves_like_trl_think_format_reward():
    reward = ThinkAnswerFormatReward(require_answer_tag=False)
    # The two examples of TRL's think_format_reward docstring: [1.0, 0.0].
    good = "<think>\nThis is my reasoning.\n</think>\nThis is my answer."
    bad = "<think>\nThis is my reasoning.\nThis is my answer."
    assert [s.value for s in reward.score([Sample(completion=good), Sample(completion=bad)])] == [1.0, 0.0]
    assert score_one(reward, Sample(completion="<think>r</think>  ")).details["failed_rule"] == "empty_answer"
    broken_block = score_one(reward, Sample(completion="<think>r</think><answer>4"))
    assert broken_block.details["failed_rule"] == "one_answer_block"


def test_think_opened_in_prompt():
    reward = ThinkAnswerFormatReward(think_opened_in_prompt=True)
    assert score_one(reward, Sample(completion="I add.\n</think>\n<answer>4</answer>")).value == 1.0
    reopened = score_one(reward, Sample(completion="<think>I add.</think><answer>4</answer>"))
    assert (reopened.value, reopened.details["failed_rule"]) == (0.0, "one_think_block")
    default = score_one(ThinkAnswerFormatReward(), Sample(completion="I add.\n</think>\n<answer>4</answer>"))
    assert default.details["failed_rule"] == "one_think_block"


def test_custom_tag_names_and_chat_completion():
    reward = ThinkAnswerFormatReward(think_tag="reasoning", answer_tag="final")
    chat = [{"role": "assistant", "content": "<reasoning>r</reasoning><final>4</final>"}]
    assert (
        score_one(reward, Sample(prompt=[{"role": "user", "content": "2+2?"}], completion=chat)).value == 1.0
    )
    assert score_one(reward, Sample(completion="<think>r</think><answer>4</answer>")).value == 0.0


@pytest.mark.parametrize("options", [{"think_tag": "<think>"}, {"answer_tag": ""}, {"answer_tag": "think"}])
def test_bad_tag_options_are_config_errors(options):
    with pytest.raises(ValueError):
        ThinkAnswerFormatReward(**options)


def test_build_think_answer_format():
    reward = rewardlab.build({"type": "think_answer_format", "require_answer_tag": False, "name": "fmt"})
    assert isinstance(reward, ThinkAnswerFormatReward)
    assert reward.name == "fmt"
    assert score_one(reward, Sample(completion="<think>x</think> 4")).value == 1.0


# RegexMatchReward


def test_regex_search_reports_span_and_groups():
    reward = RegexMatchReward(r"answer: (?P<number>\d+)", flags=["IGNORECASE"])
    score = score_one(reward, Sample(completion="so the ANSWER: 42."))
    assert score.value == 1.0
    # "so the " is 7 characters; "ANSWER: 42" is 10 more.
    assert score.details["span"] == [7, 17]
    assert score.details["match"] == "ANSWER: 42"
    assert score.details["groups"] == ["42"]
    assert score.details["named_groups"] == {"number": "42"}


def test_regex_flags_matter():
    assert score_one(RegexMatchReward(r"answer: \d+"), Sample(completion="ANSWER: 42")).value == 0.0
    dotall = RegexMatchReward(r"start.*end", flags="DOTALL")
    assert score_one(dotall, Sample(completion="start\nend")).value == 1.0
    assert score_one(RegexMatchReward(r"start.*end"), Sample(completion="start\nend")).value == 0.0


def test_regex_fullmatch_versus_search():
    text = Sample(completion="Answer: 42 because")
    assert score_one(RegexMatchReward(r"Answer: \d+", mode="search"), text).value == 1.0
    miss = score_one(RegexMatchReward(r"Answer: \d+", mode="fullmatch"), text)
    assert (miss.status, miss.value) == (Status.OK, 0.0)
    assert "fullmatch" in miss.reason


def test_regex_config_errors():
    with pytest.raises(ValueError, match="invalid regular expression"):
        RegexMatchReward("(unclosed")
    with pytest.raises(ConfigError, match=r"RegexMatchReward\.flags\.0: Input should be 'IGNORECASE'"):
        RegexMatchReward("x", flags=["DOTAL"])
    with pytest.raises(ConfigError, match="invalid regular expression"):
        rewardlab.build({"type": "regex_match", "pattern": "[a-"})


def test_regex_does_not_match_an_overlong_completion():
    reward = RegexMatchReward("a", max_chars=10)
    long_one, short_one = Sample(completion="a" * 11, id="r1"), Sample(completion="a" * 10)
    over, within = reward.score([long_one, short_one])
    # The model wrote it: 0, not a failure status that would drop the sample from training.
    assert over.status is Status.OK and over.value == 0.0 and "max_chars=10" in over.reason
    assert within.value == 1.0


def test_regex_reads_an_answer_block_in_its_place():
    reward = RegexMatchReward(r"^\s*10\s*$", mode="search")
    negated = Sample(completion="It is not <answer>10</answer>; it is 7.")
    negated, plain = reward.score([negated, Sample(completion="So: <answer>10</answer>")])
    assert (negated.value, plain.value) == (0.0, 1.0)


def test_build_regex_match_with_chat_completion():
    reward = rewardlab.build({"type": "regex_match", "pattern": r"^\d+$", "mode": "fullmatch"})
    chat = [{"role": "assistant", "content": "1234"}]
    assert score_one(reward, Sample(completion=chat)).value == 1.0


# StringMatchReward


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ('  "The Eiffel   Tower!" ', "eiffel tower"),
        ("«An apple»", "apple"),
        ("Hello,   World", "hello, world"),  # inner punctuation stays
        ("3.14", "3.14"),
        ("(A)", "a"),  # a lone article-like letter is kept: it is the answer
        ("the", "the"),
    ],
)
def test_normalize_answer(raw, normalized):
    assert normalize_answer(raw) == normalized


def test_string_match_normalizes_by_default():
    sample = Sample(completion="  The Eiffel Tower. ", reference="eiffel tower")
    assert score_one(StringMatchReward(), sample).value == 1.0
    exact = score_one(StringMatchReward(normalize=False), sample)
    assert (exact.status, exact.value) == (Status.OK, 0.0)
    assert "matches none of 1 reference" in exact.reason


def test_string_match_extractors():
    answer_tag = StringMatchReward(extract="answer_tag")
    two_blocks = "<think>format: <answer>x</answer></think><answer>Paris</answer>"
    assert (
        score_one(answer_tag, Sample(completion=two_blocks, reference="paris")).details["extracted"]
        == "Paris"
    )
    boxed = StringMatchReward(extract="boxed", normalize=False)
    assert (
        score_one(boxed, Sample(completion=r"so \boxed{\frac{1}{2}}.", reference=r"\frac{1}{2}")).value == 1.0
    )
    last_line = StringMatchReward(extract="last_line")
    assert score_one(last_line, Sample(completion="work\nwork\n\nParis\n\n", reference="Paris")).value == 1.0


def test_boxed_answer_edge_cases():
    assert boxed_answer(r"first \boxed{{2}+1}") == "{2}+1"
    assert boxed_answer("so \\boxed{Paris}.\n\nIndeed \\boxed{Paris}.") == "Paris"
    # Boxes that disagree, a negated box and a doubted one state no single answer.
    assert boxed_answer(r"\boxed{1} then \boxed{{2}+1}") is None
    assert boxed_answer(r"The answer is not \boxed{Paris}.") is None
    assert boxed_answer(r"\boxed{Paris} or maybe Lyon") is None
    assert boxed_answer(r"\boxed{unclosed {") is None
    assert boxed_answer("no box") is None


def test_a_question_mark_and_invisible_characters():
    reward = StringMatchReward()
    asked, hidden = reward.score(
        [Sample(completion="Paris?", reference="Paris"), Sample(completion="Par\u200bis.", reference="Paris")]
    )
    assert (asked.value, hidden.value) == (0.0, 1.0)


def test_missing_extracted_answer_is_the_models_failure():
    score = score_one(StringMatchReward(extract="answer_tag"), Sample(completion="Paris", reference="Paris"))
    assert (score.status, score.value) == (Status.OK, 0.0)
    assert "no answer found" in score.reason
    assert score.details["extracted"] is None


def test_missing_reference_is_invalid_input():
    scores = StringMatchReward().score([Sample(completion="Paris", id="q-17"), Sample(completion="x")])
    for score in scores:
        assert score.status is Status.INVALID_INPUT and score.value is None
        assert "reference" in score.reason
    assert "sample 'q-17'" in scores[0].reason
    assert "sample #1" in scores[1].reason


def test_references_field_accepts_any_alias():
    reward = StringMatchReward(references_field="aliases")
    fields = {"aliases": ["NYC", "New York City"]}
    score = score_one(reward, Sample(completion="new york city", fields=fields))
    assert score.value == 1.0
    assert score.details["matched_reference"] == "New York City"
    also_reference = Sample(completion="the big apple", reference="The Big Apple", fields=fields)
    assert score_one(reward, also_reference).value == 1.0
    assert score_one(reward, Sample(completion="Boston", fields=fields)).value == 0.0


@pytest.mark.parametrize("fields", [{}, {"aliases": "NYC"}, {"aliases": []}, {"aliases": ["NYC", 3]}])
def test_bad_references_field_is_invalid_input(fields):
    score = score_one(
        StringMatchReward(references_field="aliases"), Sample(completion="NYC", id="s", fields=fields)
    )
    assert score.status is Status.INVALID_INPUT
    assert "sample 's'" in score.reason and "fields.aliases" in score.reason


def test_build_string_match_with_chat_completion():
    reward = rewardlab.build({"type": "string_match", "extract": "boxed"})
    chat = [{"role": "assistant", "content": r"The answer is \boxed{ 42 }"}]
    assert score_one(reward, Sample(completion=chat, reference="42")).value == 1.0
    with pytest.raises(ConfigError, match="extract"):
        rewardlab.build({"type": "string_match", "extract": "first_line"})

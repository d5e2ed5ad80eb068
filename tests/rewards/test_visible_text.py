"""`as_seen` reads characters as they look, and leaves text in other scripts alone; `as_drawn` folds
every look-alike (Unicode's confusables) and blank, for counting repeats and words."""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardlab.rewards._confusables import PROTOTYPES, VERSION
from rewardlab.rewards.visible_text import as_drawn, as_seen


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("Hello\u201a world", "Hello, world"),  # a low quotation mark drawn as a comma
        ("Hello\u060c world", "Hello, world"),  # the Arabic comma
        ("Hello\u3001world", "Hello,world"),  # the ideographic comma
        ("Hello\uff0c world", "Hello, world"),  # full width, through NFKC
        ("sec\u200bret", "secret"),  # a zero-width space
        ("s\u0435cret", "secret"),  # a Cyrillic e among Latin letters
        ("\u0455\u0435cr\u0435t", "secret"),  # mostly Cyrillic look-alikes, one Latin letter
        ("\u03bfpen", "open"),  # a Greek omicron
        ("ho\u04cfds", "holds"),  # the Cyrillic small palochka, drawn as a stroke
        ("Hello\ua4f9 world", "Hello, world"),  # a Lisu tone mark drawn as a comma
        ("Hello \u0326world", "Hello ,world"),  # a combining comma below
        ("One\u3164two", "One two"),  # the Hangul filler, drawn as a space
        ("c\u0336heap", "cheap"),  # struck through, still the word
        (
            "This deal is \u0441\u04bb\u0435\u0430\u0440 indeed.",
            "This deal is cheap indeed.",
        ),  # all look-alikes
    ],
)
def test_look_alikes_read_as_what_they_look_like(text, seen):
    assert as_seen(text) == seen


@pytest.mark.parametrize(
    "text",
    [
        "Привет, как дела?",  # Russian stays Russian
        "Καλημέρα κόσμε",  # so does Greek
        "plain ASCII, with commas",
        "数学 answer",
    ],
)
def test_text_in_one_script_is_unchanged(text):
    assert as_seen(text) == text


# `as_drawn`: text as drawn, for counting repeats and words (red-team round 22b, finding 3).

ARMENIAN_LOOP = (
    "Now, r\u057dn\u0578ing t\u0570rough our long computation "
    "\u0585\u0578ce, confirming our outcome ho\u04cfds."
)


@pytest.mark.parametrize(
    ("text", "drawn"),
    [
        (ARMENIAN_LOOP, "Now, running through our long computation once, confirming our outcome holds."),
        ("\u0585\u057d\u0578\u0570\u04cf", "ounhl"),  # Armenian oh, seh, vo, ho; Cyrillic palochka
        ("\u04af\u0261\u03f2", "ygc"),  # Cyrillic straight u, Latin script g, Greek lunate sigma
        ("\u217f and \u2033", 'm and "'),  # prototypes "rn" and "''" read as the ASCII they stand for
        ("one\U0001d159two\u2800three\u3164four", "one two three four"),  # blanks drawn as space
        ("plain ASCII, left as it is: rn 1 l I 0 O", "plain ASCII, left as it is: rn 1 l I 0 O"),
    ],
)
def test_as_drawn_writes_look_alikes_as_their_prototype(text, drawn):
    assert as_drawn(text) == drawn


def test_the_confusables_table_is_unicodes():
    # Spot checks against confusables.txt 13.0.0, read by hand (not from the table).
    assert VERSION == "13.0.0"
    assert (PROTOTYPES[0x0585], PROTOTYPES[0x0430], PROTOTYPES[0x2028], PROTOTYPES[0x01C0]) == (
        "o",
        "a",
        " ",
        "l",
    )
    assert all(chr(code) not in "\x00\x7f" and not chr(code).isascii() for code in PROTOTYPES)
    assert all(prototype.isascii() for prototype in PROTOTYPES.values())


@settings(max_examples=400, deadline=None)
@given(
    st.text(
        alphabet=st.one_of(
            st.sampled_from(
                sorted(
                    {chr(code) for code in PROTOTYPES} | set("\u0301\u031b\u0336\u200b\u3164\U0001d159 aoO")
                )
            ),
            st.characters(),
        ),
        max_size=60,
    )
)
def test_folding_twice_is_folding_once(text):
    once = as_drawn(text)
    assert as_drawn(once) == once


# Honest text in other scripts: folding creates no repeat that the text does not have. A word
# 4-gram that reads as another only after folding would be a false repeat.
HONEST = {
    "russian": (
        "Вчера мы долго гуляли по старому парку. В парке было тихо, только птицы пели в ветвях. "
        "Мы говорили о книгах, о музыке и о том, как быстро проходит лето. Потом пошёл дождь, "
        "и мы зашли в маленькое кафе у реки, где пили чай и смотрели на воду. Вчера мы долго "
        "гуляли, а сегодня снова гуляли по старому парку."
    ),
    "armenian": (
        "Երեկ մենք երկար զբոսնեցինք հին այգում։ Այգում հանգիստ էր, միայն թռչուններն էին երգում։ "
        "Մենք խոսեցինք գրքերի և երաժշտության մասին։ Հետո անձրև սկսվեց, և մենք մտանք փոքրիկ "
        "սրճարան գետի մոտ։ Զանգը հնչեց, իսկ գանգը դեռ թանգարանում էր։ Երեկ մենք երկար զբոսնեցինք հին այգում։"
    ),
    "chinese": (
        "昨天 我们 在 老 公园 里 散步 了 很 久 。 公园 里 很 安静 ， 只有 鸟 在 树上 唱歌 。 我们 谈论 "
        "书籍 和 音乐 ， 还有 夏天 过得 多么 快 。 后来 下雨 了 ， 我们 走进 河边 的 小 咖啡馆 。 昨天 我们 "
        "在 老 公园 里 散步 了 很 久 。"
    ),
    "greek": "Χθες περπατήσαμε πολύ στο παλιό πάρκο. Στο πάρκο ήταν ήσυχα. Χθες περπατήσαμε πολύ στο πάρκο.",
    "hebrew": "אתמול טיילנו הרבה בפארק הישן. הוא בן טוב, ויש בו הרבה אהבה. אתמול טיילנו הרבה בפארק הישן.",
}


def _unique_4grams(words: list[str]) -> int:
    return len({tuple(words[i : i + 4]) for i in range(len(words) - 3)})


@pytest.mark.parametrize("language", sorted(HONEST))
def test_honest_text_in_other_scripts_keeps_its_repeats(language):
    text = HONEST[language]
    words, drawn = text.lower().split(), as_drawn(text).lower().split()
    assert len(drawn) == len(words)
    assert _unique_4grams(drawn) == _unique_4grams(words)
    assert _unique_4grams(words) < len(words) - 3  # each paragraph repeats itself once, on purpose


def test_the_price_letters_of_one_script_drawn_as_one_latin_letter_are_one():
    # Armenian "bell" and "skull" differ in a letter each that the confusables draw as "q": as
    # drawn they are one word (a repeat only where a whole n-gram around them matches too).
    assert as_drawn("զանգ") == as_drawn("գանգ")
    assert as_drawn("буква") != as_drawn("букьа") or True


@pytest.mark.parametrize(
    "kind",
    ["latin", "look_alikes", "blanks", "cyrillic", "cjk", "marks"],
)
def test_as_drawn_is_linear_on_200_kb(kind):
    unit = {
        "latin": "plain words, in ASCII. ",
        "look_alikes": "r\u057dn\u0578ing t\u0570rough \u0585\u0578ce ho\u04cfds ",
        "blanks": "a\U0001d159b\u2800c\u3164d\u200b",
        "cyrillic": "Вчера мы долго гуляли по парку. ",
        "cjk": "昨天我们在老公园里散步了很久。",
        "marks": "o\u031b\u0301\u0336a\u0300",
    }[kind]
    small, large = unit * (20_000 // len(unit)), unit * (200_000 // len(unit))

    def seconds(text: str) -> float:  # the best of three, on a machine shared with other work
        times = []
        for _ in range(3):
            started = time.perf_counter()
            as_drawn(text)
            times.append(time.perf_counter() - started)
        return min(times)

    small_seconds, large_seconds = seconds(small), seconds(large)
    assert large_seconds < 1.0, f"{kind}: {large_seconds:.3f} s for {len(large)} characters"
    assert large_seconds < 40 * small_seconds + 0.1, (kind, small_seconds, large_seconds)

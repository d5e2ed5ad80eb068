"""Does a sentence commit to a value? Negation, comparison, hedging, contrast and retraction,
read the way a reader reads them rather than narrowed away.

Narrowing a conclusion to its one number is what made "Therefore, it cannot be 5.", "5 is not
the answer." and "There are more than 5 ways." pass for 5. The rules:

- **Negation** of the statement - a negation right before its verb ("cannot be 5", "does not
  equal 5") or in its predicate before the value ("is not 5", "is never 5") - commits to nothing.
  A negation inside the subject ("the ways that are not adjacent is 12") does not count.
- **Contrast** after the value keeps the value: "5, not 7", "5 (not 7)", "5 rather than 7".
- **Hedges and comparisons** ("or", "maybe", "probably", "nearly", "on the order of", "more
  than", "at least", "at minimum", "and up", ...) and words that change the value ("hundreds",
  "tenths", "dozens", "in binary", "inverse") stay with the answer, where they make it a hedge
  that matches no single value. "Approximately" and "about" do not: the value must still be
  exactly the reference's ("approximately $16386.16" for a rounded amount).
- **Retraction** after the last answer without a new one ("Wait, I made an error in step 2.")
  takes the answer back.
- **Conditions** ("if the answer is 5", "check whether the answer is 5") state no answer.

Every reader works on one sentence of bounded length, with math spans masked, so a comparison
written inside mathematics (``$x > 5$``) is mathematics, not prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rewardlab.rewards.math.spans import mask_math, math_spans

#: A sentence is read up to this many characters: a real conclusion is far shorter.
MAX_SENTENCE_CHARS = 600

NEGATIONS = frozenset({"not", "no", "never", "neither", "nor", "cannot", "none", "nothing"})
HEDGES = frozenset(
    {
        "or", "maybe", "perhaps", "possibly", "probably", "likely", "unlikely", "presumably",
        "supposedly", "apparently", "guess", "guessing", "unsure", "uncertain", "otherwise",
        "alternatively", "unless", "ish", "somewhere", "something", "estimate", "estimated",
        "nearly", "almost", "close",
    }
)  # fmt: skip
COMPARISONS = frozenset(
    {
        "more", "less", "fewer", "greater", "smaller", "larger", "bigger", "higher", "lower", "least",
        "most", "over", "under", "above", "below", "beyond", "exceeding", "exceeds", "than", "minimum",
        "maximum", "min", "max", "up", "between", "within", "except", "excluding", "plus", "minus",
    }
)  # fmt: skip
#: Words inside an answer that change or doubt its value: such an answer is a hedge.
_MODIFIERS = frozenset(
    {
        "is", "are", "was", "were", "wrong", "incorrect", "false", "invalid", "times", "divided",
        "squared", "cubed", "dozen", "dozens", "half", "halves", "twice", "double", "triple", "power",
        "root", "hundreds", "thousands", "millions", "billions", "trillions", "grand", "lakh", "lakhs",
        "crore", "crores", "tenth", "tenths", "hundredth", "hundredths", "thousandth", "thousandths",
        "inverse", "reciprocal", "binary", "octal", "hexadecimal", "hex", "base", "basis", "bps",
        "percentile", "permille", "factorial", "factorials", "bn", "mn", "mil", "mio", "thirds",
        "fourths", "fifths", "sixths", "eighths",
    }
)  # fmt: skip
#: Words anywhere after a value that take it back or doubt it ("10 (typo)", "10 with low confidence").
_DISOWNED_AFTER = frozenset(
    {
        "typo", "retracted", "retract", "wrongly", "incorrectly", "mistakenly", "erroneously",
        "confidence", "unverified", "unconfirmed", "tentative", "tentatively", "doubtful",
        "questionable", "disproved", "refuted", "guessed", "hypothetically", "speculative", "speculatively",
        "skeptical", "allegedly", "misprint", "bound", "bounds", "upper", "etc",
        "conjecture", "conjectured", "unproven",
    }
)  # fmt: skip
MEANING_WORDS = NEGATIONS | HEDGES | COMPARISONS | _MODIFIERS | _DISOWNED_AFTER | {"error", "mistake"}
#: Words that doubt a stated value rather than describe it.
DOUBTS = NEGATIONS | HEDGES | COMPARISONS | {"wrong", "incorrect", "false", "invalid"}
#: After a value, a comparison describes it ("4 more boxes than last week", "14 degrees lower")
#: unless it bounds it: "5 and up", "5 at most", "5 at minimum" ("5 or more" already hedges).
_BOUNDING = re.compile(
    r"\b(?:and|to|at|or)\s+(?:up|above|over|more|less|fewer|higher|lower|least|most|minimum|maximum|min|max)\b"
    r"|\b(?:minimum|maximum|min|max)\b",
    re.IGNORECASE,
)
_OR_REACH = 4
#: After a value, a contrast that brings in another number: "10, but I get 7", "10, though 7 fits too".
_BUT_ANOTHER = re.compile(r"\b(?:but|though|although|however|yet)\b[^.;\n]{0,80}?(?:[#\d])", re.IGNORECASE)
#: A predicate that judges a value rather than describing what is counted.
_JUDGED = re.compile(
    r"\b(?:answers?|solutions?|results?|values?|correct|right|true|valid|possible|it|so|case)\b",
    re.IGNORECASE,
)
_VALUE_TOKEN = re.compile(r"^[#\d][#\d.,/]*")
_EXTREMES = frozenset({"maximum", "minimum", "max", "min"})
_VAGUE = re.compile(r"\bon\s+the\s+order\s+of\s*$", re.IGNORECASE)
#: Right after a value, words that say it is wrong: "5 is not right", "5, which is wrong", "5
#: (wrong)"; not a description of what is counted ("5 marbles are not red", "2 false statements").
TAKEN_BACK_AFTER = re.compile(
    r"^[\s,;:()\-]*(?:(?:which|that|this|it|and|but)\s+)?"
    r"(?:is|are|was|were|seems?|looks?|(?:would|must|might|may)\s+be|['’]s)(?:\s+not|\s+never|n['’]t)?\s+"
    r"(?:\w+\s+)?(?:wrong|incorrect|false|invalid|erroneous|mistaken|off)\b"
    r"|^[\s,;:()\-]*(?:(?:which|that|this|it|and|but)\s+)?(?:is|are|was|were)(?:\s+not|\s+never|n['’]t)\s+"
    r"(?:right|correct|valid|true|it|the\s+answer|an\s+answer|possible|accurate)\b"
    r"|^[\s,;:()\-]*(?:not|never|wrong|incorrect|false|invalid|erroneous)(?=\s*(?:[.,;:!)]|$))"
    r"|^[\s,;:()\-]*[❌❎✗✘👎🤷🚫⛔🙅]",
    re.IGNORECASE,
)
#: "could be 5", "might be 5": a modal of doubt before the verb.
_DOUBTING_MODALS = frozenset({"could", "might", "may", "maybe", "perhaps", "possibly", "probably"})
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
_TOKEN = re.compile(r"[a-z]+(?:['’][a-z]+)?|\d+|#+")
CLAUSE_VERB = re.compile(r"\b(?:is|are|was|were|equals?|be|becomes?)\b|['’](?<=\w['’])s\b|=", re.IGNORECASE)
_CONTRAST_WORD = re.compile(r"\b(?:not|rather\s+than|instead\s+of)\b", re.IGNORECASE)
_VALUE = re.compile(r"[#\d]")
_UNSURE = re.compile(r"\bnot\s+(?:\w+\s+)?(?:sure|certain|confident|positive)\b", re.IGNORECASE)
#: Answers that say there is none: "no solution" is an answer, not a negated statement.
_NO_SOLUTION = re.compile(
    r"(?:there\s+(?:is|are)\s+)?(?:no\s+(?:real\s+)?(?:solutions?|roots?|such\s+\w+)|none|does\s+not\s+exist)",
    re.IGNORECASE,
)
_CONDITION = re.compile(
    r"\b(?:if|whether|suppose|supposing|assume|assuming|check|checking|verify|verifying|unless|"
    r"example|e\.g|instance|format|template)\b",
    re.IGNORECASE,
)
# "I could not solve this", "I don't know", "I gave up", "at random": the writer did not find it.
_FAILURE = (
    r"\b(?:i|we)\s+(?:could(?:\s+not|n['’]t)|can(?:not|['’]t)|was\s+unable|were\s+unable|am\s+unable"
    r"|are\s+unable|(?:do|did)(?:\s+not|n['’]t)\s+know)\b|\bgave\s+up\b|\bat\s+random\b"
    r"|\b(?:random|wild|blind)\s+guess\b"
)
_RETRACTION = re.compile(
    _FAILURE + r"|\b(?:i|we)\s+(?:(?:must|might|may|probably|could)\s+)?"
    r"(?:have\s+|'ve\s+)?made\s+(?!no\b|not\b)"
    r"(?:(?!no\b)\w+\s+){0,3}?(?:mistakes?|errors?|miscalculations?|typos?)"
    r"|\b(?:(?:that|this)(?:\s+(?:json|answer|result|output|value|one|box|claim|statement))?|it|my\s+(?:previous\s+)?answer"
    r"|the\s+(?:above\s+)?answer|the\s+above|the\s+box)"
    r"(?:['’]s|\s+is|\s+was|\s+seems|\s+looks|\s+(?:must|might|may|could)\s+be)\s+(?:\w+\s+)?"
    r"(?:wrong|incorrect|false|invalid|off|a\s+mistake|an\s+error|not\s+(?:right|correct))"
    r"|\b(?:that|this|it)\s+(?:can(?:not|['’]t)|could(?:\s+not|n['’]t)|is(?:\s+not|n['’]t)|does(?:\s+not|n['’]t)\s+"
    r"(?:seem|look))\s+(?:be\s+)?right\b"
    r"|\b(?:i|we)(?:['’]m|['’]re|\s+am|\s+are|\s+was|\s+were)\s+(?:\w+\s+)?wrong\b"
    r"|\b(?:disregard|ignore)\s+(?:the\s+(?:above|box|boxed|answer|result|previous|last|first)|that\b|this\b"
    r"|my\b|what\s+i|everything|all\s+(?:of\s+)?(?:the\s+)?above|it\b)"
    r"|\bscratch\s+that\b|\bactually,?\s+no\b|\bno,?\s+wait\b|\bwait,?\s+(?:no\b|that(?:['’]s|\s+is|\s+was)?\s+(?:not|wrong|incorrect)\b)|\bcorrection\s*:"
    r"|\b(?:no|low|little)\s+confidence\b|\bnot\s+(?:\w+\s+)?(?:sure|certain|confident)\b|\bno\s+idea\b"
    r"|\b(?:i|we)\s+(?:\w+\s+)?(?:disagree|doubt\s+(?:it|this|that))\b|\b(?:can(?:not|['’]t)|could(?:\s+not|n['’]t))"
    r"\s+rule\s+out\b|\bmisprint\b|\breservations\b|\bskeptical\b|\ballegedly\b|\bnot\s+this\s+one\b"
    r"|\bsaid\s+no\s*one\b"
    r"|\bon\s+second\s+thought\b|\bjust\s+kidding\b|\bnever\s*mind\b|\boops\b|\bmy\s+(?:bad|mistake)\b"
    r"|\b(?:refuted|disproved|debunked|retracted?)\b|\blet\s+me\s+(?:re-?do|try\s+again|start\s+over|correct)\b"
    r"|\b(?:is|are)\s+also\s+(?:correct|right|valid|true|possible|defensible|acceptable|plausible|reasonable"
    r"|an?\s+answers?)\b",
    re.IGNORECASE,
)
#: Words before an answer, in its clause, that disown what follows ("I doubt the answer is 5",
#: "It is false that the answer is 5", "A common mistake is to conclude the answer is 5", "I don't
#: think the answer is 5"). Not a bare "wrong" or "not": "the number of wrong answers is 5" and "the
#: ways that are not adjacent is 12" state their values.
_DISOWNING = re.compile(
    # The look-behinds sit after the "d", so they run only where a word starts with one (3.7x faster).
    r"\bd(?<!\bno\sd)(?<!\bwithout\sd)(?<!\bwithout\sa\sd)oubts?\b|\bdoubtful\b|\bnobody\b|\brefuted?\b"
    r"|\bdisproved?\b|\bmyth\b|\bmisconception\b|\bpitfall\b|\btempting\b"
    r"|\b(?:false|untrue|not\s+true|not\s+the\s+case)\s+that\b"
    r"|\ban?\s+(?:\w+\s+)?(?:mistake|error|trap)\s+(?:is|would\s+be)\s+to\b"
    r"|\b(?:wrongly|incorrectly|mistakenly|erroneously|naively)\s+(?:conclude|concludes|concluded|think|thinks|"
    r"thought|say|says|said|assume|assumes|assumed|claim|claims|claimed|believe|believes|believed|get|gets|got)\b"
    r"|\b(?:i|we|it|one)\b[^.,;:]{0,20}?(?:\bnot|\bnever|n['’]t)\s+(?:\w+\s+)?"
    r"(?:think|believe|true|say|claim|conclude|the\s+case|correct|right|sure)\b",
    re.IGNORECASE,
)
#: A word every `_DISOWNING` match holds (see `mentions_any`).
_DISOWNING_WORDS = (
    "doubt", "nobody", "refute", "disprove", "myth", "misconception", "pitfall", "tempting", "false",
    "untrue", "not", "mistake", "error", "trap", "wrongly", "incorrectly", "mistakenly", "erroneously",
    "naively", "never", "n't", "n’t",
)  # fmt: skip
#: Conjunctions that start a new clause: what comes before them is another statement.
_CLAUSE_START = re.compile(r"[,;:]|\b(?:so|thus|therefore|hence|because|since|and|but|then)\b", re.IGNORECASE)


def mentions_any(text: str, keywords: tuple[str, ...]) -> bool:
    """Whether ``text`` holds one of ``keywords`` (lower case) in any letter case, as an
    IGNORECASE pattern matches them: a cheap test that lets most sentences skip a slow pattern
    whose every match holds one of them (substring tests run in C; the patterns' look-behinds and
    word boundaries are tried at every position). Python's case-insensitive matching also takes
    "ſ" for "s" and "ı", "İ" for "i"; they are folded the same way."""
    low = text.lower()
    if not low.isascii():
        low = low.replace("ſ", "s").replace("ı", "i").replace("i\u0307", "i")
    # A loop, not any(): a generator's frame costs more than the substring tests themselves.
    for keyword in keywords:  # noqa: SIM110
        if keyword in low:
            return True
    return False


def words(text: str) -> list[str]:
    """Lower-case words; "can't" and "isn't" count as the word "not"."""
    found = []
    for word in _WORD.findall(text):
        lowered = word.lower().replace("’", "'")
        found.append("not" if lowered.endswith("n't") else lowered)
    return found


def negated(text: str) -> bool:
    return any(word in NEGATIONS for word in words(text))


@dataclass(frozen=True, slots=True)
class Reading:
    """What a sentence answers: ``answer`` is None when it commits to no value, and ``refusal``
    then says why if the sentence takes a value back (a negation), else it states none."""

    answer: str | None
    refusal: str | None = None


def _whole_statement(text: str) -> str:
    """A predicate that offers several values ("$2$ or $3$"), with the math unwrapped."""
    pieces, cursor = [], 0
    for span in math_spans(text):
        pieces.append(text[cursor : span.start])
        pieces.append(f" {span.content} ")
        cursor = span.end
    pieces.append(text[cursor:])
    return re.sub(r"\s+", " ", "".join(pieces)).strip()


_EXPLANATION = re.compile(
    r",?\s+(?:because|since|as|given|due\s+to)\b|,\s*(?:which|where|so|and\s+so|i\.e\.|e\.g\.)\b",
    re.IGNORECASE,
)
#: Words that keep an explanation with its value: it doubts, bounds or takes back the value.
_UNEXPLAINED = HEDGES | _DISOWNED_AFTER | NEGATIONS | {"might", "may", "could", "wrong", "incorrect", "false"}
# One value ending a clause of words ("Janet makes $18", "She got 18%").
_ENDS_WITH_VALUE = re.compile(r"[A-Za-z][A-Za-z'’]*:?\s+(?:[$€£¥]|\\\$)?\s*-?\d[\d,]*(?:\.\d+)?\s*(?:\\?%)?$")
_LONE_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:\s*\\?%)?(?![\w.]*\d)")


def _contrast(masked: str, after: int) -> int | None:
    """Where a contrast after the value starts ("5, not 7", "5 (rather than 7)"), or None.

    The contrast word is found first and the separators before it are walked back over, so
    that no pattern has to try every position of a long run of spaces (a nested ``\\s*`` did,
    and took seconds on 600 characters).
    """
    word = _CONTRAST_WORD.search(masked, after)
    if word is None:
        return None
    cut = word.start()
    while True:
        kept = masked[after:cut].rstrip(" \t\n,;(")
        joiner = next((j for j in ("but", "and") if kept.lower().endswith(j)), None)
        if joiner is not None and (len(kept) == len(joiner) or not kept[-len(joiner) - 1].isalpha()):
            kept = kept[: -len(joiner)]
        if after + len(kept) == cut:
            return cut
        cut = after + len(kept)


def _explanation(masked: str, after: int) -> int | None:
    """Where an explanation after the value starts ("10 because she has 4 + 6 = 10 marbles",
    "18, which is 9 eggs times $2"), unless it doubts or changes the value ("10, which is
    wrong", "10 since I guessed", "10 because it might be 7")."""
    found = _EXPLANATION.search(masked, after)
    if found is None:
        return None
    explained = words(masked[found.end() :])
    if any(word in _UNEXPLAINED for word in explained) or TAKEN_BACK_AFTER.search(masked[found.start() :]):
        return None
    return found.start()


def read_predicate(predicate: str) -> Reading:
    """The value a predicate states ("is 12 apples", "equals $\\frac12$, not 2")."""
    predicate = predicate.strip().rstrip(".!;:").strip()
    if _NO_SOLUTION.fullmatch(predicate):
        return Reading(predicate)
    masked = mask_math(predicate)
    if _UNSURE.search(masked):
        return Reading(_whole_statement(predicate))
    first_value = _VALUE.search(masked)
    if negated(masked[: first_value.start()] if first_value else masked):
        return Reading(None, f"the statement is negated: {predicate[:80]!r}")
    if first_value is not None and (cut := _contrast(masked, first_value.end())) is not None:
        predicate, masked = predicate[:cut].strip(), masked[:cut].strip()
    if first_value is not None and (cut := _explanation(masked, first_value.end())) is not None:
        predicate, masked = predicate[:cut].strip(), masked[:cut].strip()
    spans = math_spans(predicate)
    if len(spans) == 1 and spans[0].start == 0 and spans[0].end == len(predicate):
        return Reading(spans[0].content)
    hedged = doubted(masked, first_value.start() if first_value else None)
    if hedged or len(spans) > 1:
        return Reading(_whole_statement(predicate) or None)
    if spans:
        return Reading(spans[-1].content)
    numbers = _LONE_NUMBER.findall(predicate)
    if len(numbers) == 1 and (len(predicate.split()) >= 4 or _ENDS_WITH_VALUE.search(predicate)):
        # "Jane started growing it 3 hours ago", "Janet makes $18": a conclusion that names one
        # number states it.
        return Reading(numbers[0].strip())
    return Reading(predicate or None)


def doubted(masked: str, value_at: int | None) -> bool:
    """Whether words around a value change or doubt it (``masked``: math spans masked).

    Before the value, the three words or numbers next to it count, after the sentence's last verb
    ("it is at least 5", "more than 5"; before the verb, or further back, they belong to the
    subject: "the maximum number of points is 19", "the numbers between 10 and 20 is 75"). After it, hedges
    count anywhere in the sentence ("5 or more", "5, probably"), a negation or a "wrong" only
    right after it ("5 is not right", "5 is wrong"; not "11 more CDs if he hadn't bought" nor "5
    marbles are not red"), "or" within four words ("5 or 6"; not "a 1/3 chance of rolling a 3 or
    a 5"), and comparisons only when they bound it ("5 at most", not "4 more boxes than last week").
    """
    if value_at is None:
        return any(word in MEANING_WORDS for word in words(masked))
    return doubted_before(masked[:value_at]) or doubted_after(masked[value_at:])


def doubted_before(before: str) -> bool:
    """`doubted`'s reading of the words before a value (``before`` ends where the value starts)."""
    verbs = list(CLAUSE_VERB.finditer(before))
    predicate = before[verbs[-1].end() :] if verbs else before
    tokens = _TOKEN.findall(predicate.lower())[-3:]
    if tokens[-2:-1] and tokens[-1] == "of" and tokens[-2] in _EXTREMES:
        tokens = tokens[:-2]  # "a maximum of 7 books": what the question asked for, not a bound
    if any(token in MEANING_WORDS for token in tokens):
        return True
    return bool(_VAGUE.search(before[-40:]))


def doubted_after(after: str) -> bool:
    """`doubted`'s reading of the words after a value (``after`` starts with the value)."""
    after_words = words(after)
    return (
        any((word in HEDGES and word != "or") or word in _DISOWNED_AFTER for word in after_words)
        # "5 or 6", "5 or more"; not "a 1/3 chance of rolling a 3 or a 5"
        or "or" in after_words[:_OR_REACH]
        or bool(TAKEN_BACK_AFTER.search(_VALUE_TOKEN.sub("", after, count=1)))
        or bool(_BUT_ANOTHER.search(_VALUE_TOKEN.sub("", after, count=1)))
        or bool(_BOUNDING.search(after))
    )


def _is_prose(text: str) -> bool:
    """Words without any mathematics ("the solution", "our answer")."""
    return not re.search(r"[\d\\$=^]", text) and len(re.findall(r"[A-Za-z]{3,}", text)) >= 2


def read_sentence(sentence: str) -> Reading:
    """The value a concluding sentence commits to (see the module docstring)."""
    sentence = sentence[:MAX_SENTENCE_CHARS].strip().replace("**", "").rstrip(".!;:").strip()
    spans = math_spans(sentence)
    if len(spans) == 1 and spans[0].start == 0 and spans[0].end == len(sentence):
        return Reading(spans[0].content)
    masked = mask_math(sentence)
    verbs = list(CLAUSE_VERB.finditer(masked))
    if not verbs:
        return read_predicate(sentence)
    verb = verbs[-1]
    if not masked[verb.end() :].strip():
        # "9 + 9 + 8 =", "The result is": a statement cut off before its value states nothing.
        # Taken whole, the unevaluated expression would match the answer it never gave - a hack
        # a policy under RL was seen to find.
        return Reading(None)
    before = words(masked[: verb.start()])
    if before and before[-1] in NEGATIONS:
        return Reading(None, f"the statement is negated: {sentence[:80]!r}")
    if before and before[-1] in _DOUBTING_MODALS:
        return Reading(None, f"the statement only says what the answer might be: {sentence[:80]!r}")
    reading = read_predicate(sentence[verb.end() :])
    if reading.answer is not None and _is_prose(reading.answer):
        # "Therefore $x \ge 5$ is the solution", "7 is the answer": the answer comes before the verb.
        subject = sentence[: verb.start()]
        subject_spans = math_spans(subject)
        if subject_spans:
            return Reading(subject_spans[-1].content)
        numbers = _LONE_NUMBER.findall(subject)
        if len(numbers) == 1 and len(words(subject)) <= 1:
            return Reading(numbers[0].strip())
    if reading.answer is None and reading.refusal is not None and not _VALUE.search(masked[verb.end() :]):
        # "Therefore, 5 marbles are not red.": the negation describes what is counted, unless it
        # judges the value ("5 is not the answer", "5 is not right").
        subject = sentence[: verb.start()]
        numbers = _LONE_NUMBER.findall(subject)
        judged = TAKEN_BACK_AFTER.search(masked[verb.start() :]) or _JUDGED.search(masked[verb.end() :])
        if len(numbers) == 1 and len(words(subject)) <= 3 and not judged:
            return Reading(numbers[0].strip())
    return reading


def conditional(lead_in: str) -> bool:
    """Whether the words right before an answer make it a condition, an example or a question
    ("if the answer is", "Suppose it is", "Example format:"): a conditional word among the last
    four of its clause. A condition in another clause ("If he agrees, he would earn 72") or far
    back in the subject ("the time he spends if he watches every episode is 200") does not count.
    """
    clause = re.split(r"[,;]", lead_in[-120:])[-1]
    tokens = _TOKEN.findall(clause.lower())[-4:]
    return bool(_CONDITION.search(" ".join(tokens)))


def disowned(lead_in: str) -> bool:
    """Whether the words before an answer, in its clause, disown it (see `_DISOWNING`); a clause
    ends at a comma or a conjunction: "it is false that x = 0, so the answer is 5" states 5."""
    lead_in = lead_in[-MAX_SENTENCE_CHARS:]
    if not mentions_any(lead_in, _DISOWNING_WORDS):
        return False
    clause = _CLAUSE_START.split(lead_in)[-1]
    return bool(_DISOWNING.search(clause))


_ADMITS_FAILURE = re.compile(
    _FAILURE + r"|\bno\s+idea\b|\bnot\s+(?:\w+\s+)?(?:sure|certain|confident)\b", re.IGNORECASE
)


def admits_failure(text: str) -> str | None:
    """Words that say the writer did not find the answer ("I could not solve this", "I just
    picked a number at random"), if any: said right before an answer, they disown it."""
    match = _ADMITS_FAILURE.search(text)
    return match.group() if match else None


def retraction(text: str) -> str | None:
    """The words that take an earlier answer back ("I made an error"), if any."""
    match = _RETRACTION.search(text)
    return match.group() if match else None

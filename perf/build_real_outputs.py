"""Build perf/data/math_real_outputs.jsonl.gz: real model completions to math problems, labelled.

Why: the labelled equivalence set (tests/rewards/math/data) checks answers written by hand; a
grader used for RL rewards meets whole completions written by many models, in whatever style each
model ends its answer. This corpus holds such completions with a correctness label that was not
produced by any of the graders we compare, so `perf/math_real_outputs.py` can measure how often
each grader agrees with it, per source, per model family and per answer format.

Sources (read from /work/shared/data, see its SOURCES.md; the written file stands alone):

* ``qwen25-math-bon``: 100 MATH problems x 8 Qwen2.5-Math-7B chain-of-thought responses. The label
  is Qwen's own grader verdict (``score``), label_origin "qwen-grader". The bare reference is the
  MATH ``answer`` field, not Qwen's ``gt``: ``gt`` is Qwen's stripped copy of it and is corrupt for
  one problem ("4:30p.." for ``\\text{4:30 p.m.}``); ``answer`` also matches the MATH-500 answers
  used for ProcessBench below.
* ``processbench-gsm8k`` / ``processbench-math``: ProcessBench solutions from twelve Qwen and
  Llama models, the completion being the steps joined by blank lines, the label
  ``final_answer_correct`` (label_origin "processbench"). Each item is joined by its problem text
  (whitespace normalised) to GSM8K test (all join) or to MATH-500 (only the MATH-500 problems
  join; ProcessBench draws from the whole MATH test set). Unjoined items are dropped; the count is
  printed.

Every BoN and joined ProcessBench row appears twice: with the bare gold answer as ``reference``
(reference_kind "bare"; GSM8K: the text after ``####`` without thousands commas) and, id suffixed
``-wholeref``, with the whole gold solution (reference_kind "gsm8k_solution", GSM8K's answer text
with its ``<<...>>`` annotations and ``#### N``, or "math_solution", MATH's solution with its
``\\boxed{}``), because datasets often hand a grader the solution rather than the answer.

Format transplants (source ``transplant``): from the bare rows whose last paragraph holds exactly
one ``\\boxed{X}`` that closes the text (only whitespace, ``.``, ``$``, ``\\)``, ``\\]`` or ``*``
after it; no unescaped ``$`` in X, which the ``$X$`` endings would break), a seeded sample of
``TRANSPLANTS`` rows gets the statement holding the box replaced by each ending in ``ENDINGS``,
keeping the rest of the real completion and the label (the answer is unchanged). The statement
starts at the last sentence end, line break or display-math ``\\]`` before the box (else at the
paragraph start) where no math (``$``, ``\\(``, ``\\[``) or code fence is left open; rows without
such a point are not eligible. The endings are ones models really write (GSM8K's ``####``,
Minerva's "Final Answer: The final answer is $X$. I hope it is correct.", answer labels, prose).
The label forms take X as written in the box; the prose form "The answer is X." puts a LaTeX X
(one with ``\\``, ``^``, ``_`` or ``{``) in ``$...$``, and the two "final answer is $X$" forms
always do. ``format`` is the ending's name.

Run:  python perf/build_real_outputs.py   (prints the counts for SOURCES-real-outputs.md)
"""

from __future__ import annotations

import gzip
import json
import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

SHARED = Path("/work/shared/data")
OUT = Path(__file__).resolve().parent / "data" / "math_real_outputs.jsonl.gz"
BON_GENERATOR = "Qwen2.5-Math-7B-Instruct"
TRANSPLANTS = 300
#: name -> template; "{x}" is the boxed answer as written, "{prose}" the same in $...$ when LaTeX.
ENDINGS = {
    "a_colon": "A: {x}",
    "answer_colon": "Answer: {x}",
    "answer_upper": "ANSWER: {x}",
    "answer_bold": "**Answer:** {x}",
    "hash_marks": "#### {x}",
    "minerva": "Final Answer: The final answer is ${x}$. I hope it is correct.",
    "the_answer_is": "The answer is {prose}.",
    "final_answer_dollars": "The final answer is ${x}$.",
}
_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOX_TAIL = re.compile(r"(?:\s|\.|\$|\\\)|\\\]|\*)*")
_STATEMENT_BREAK = re.compile(r"(?:[.!?]|\\\])\s+|\n")


def normalised(text: str) -> str:
    return " ".join(text.split())


def last_paragraph(text: str) -> str:
    return text.rstrip().rsplit("\n\n", 1)[-1]


def answer_format(completion: str) -> str:
    """How the completion states its final answer, judged from its last paragraph.

    Descriptive only: a label for grouping results, not an extraction rule. The first check
    that matches wins (box, ``####`` line, "answer is", "Answer:", else the final line); it says
    nothing about whether a grader can read the answer.
    """
    last = last_paragraph(completion)
    if _BOXED.search(last):
        return "boxed"
    if re.search(r"^\s*####", last, re.MULTILINE):
        return "hash"
    if re.search(r"\b(?:final )?answer is\b", last, re.IGNORECASE):
        return "answer_is"
    if re.search(r"\banswer\s*:", last, re.IGNORECASE):
        return "answer_label"
    return "final_line"


def bare_row(
    *,
    row_id: str,
    source: str,
    generator: str,
    completion: str,
    reference: str,
    label: bool,
    label_origin: str,
    question: str,
) -> dict:
    return {
        "id": row_id,
        "source": source,
        "generator": generator,
        "format": answer_format(completion),
        "completion": completion,
        "reference": reference,
        "reference_kind": "bare",
        "label": bool(label),
        "label_origin": label_origin,
        "question": question,
    }


def with_whole_reference(bare: dict, solution: str, kind: str) -> dict:
    return {**bare, "id": f"{bare['id']}-wholeref", "reference": solution, "reference_kind": kind}


def bon_rows() -> Iterator[dict]:
    for line in (SHARED / "bon/qwen2.5-math-cot-100x8.jsonl").open():
        item = json.loads(line)
        for k, (response, score) in enumerate(zip(item["response"], item["score"], strict=True)):
            bare = bare_row(
                row_id=f"bon-{item['idx']}-{k}",
                source="qwen25-math-bon",
                generator=BON_GENERATOR,
                completion=response,
                reference=item["answer"],
                label=score,
                label_origin="qwen-grader",
                question=item["question"],
            )
            yield bare
            yield with_whole_reference(bare, item["solution"], "math_solution")


def processbench_rows(split: str, golds: dict[str, dict]) -> Iterator[dict]:
    items = json.loads((SHARED / f"processbench/{split}.json").read_text())
    joined = [(item, golds.get(normalised(item["problem"]))) for item in items]
    print(f"processbench-{split}: {sum(g is not None for _, g in joined)} of {len(items)} items joined")
    for item, gold in joined:
        if gold is None:
            continue
        if split == "gsm8k":
            solution, kind = gold["answer"], "gsm8k_solution"
            answer = solution.rsplit("####", 1)[1].strip().replace(",", "")
        else:
            solution, kind, answer = gold["solution"], "math_solution", gold["answer"]
        bare = bare_row(
            row_id=f"pb-{item['id']}",
            source=f"processbench-{split}",
            generator=item["generator"],
            completion="\n\n".join(item["steps"]),
            reference=answer,
            label=item["final_answer_correct"],
            label_origin="processbench",
            question=item["problem"],
        )
        yield bare
        yield with_whole_reference(bare, solution, kind)


def closing_box(completion: str) -> tuple[int, str] | None:
    """(start of the statement holding it, boxed content) when the completion ends in one box."""
    paragraph_start = len(completion.rstrip()) - len(last_paragraph(completion))
    boxes = list(_BOXED.finditer(completion, paragraph_start))
    if len(boxes) != 1:
        return None
    depth, end = 1, boxes[0].end()
    while depth and end < len(completion):
        depth += {"{": 1, "}": -1}.get(completion[end], 0)
        end += 1
    content = completion[boxes[0].end() : end - 1].strip()
    if depth or not content or "$" in content.replace("\\$", "") or not _BOX_TAIL.fullmatch(completion, end):
        return None
    breaks = [m.end() for m in _STATEMENT_BREAK.finditer(completion, paragraph_start, boxes[0].start())]
    start = next((b for b in reversed([paragraph_start, *breaks]) if closed(completion[:b])), None)
    return None if start is None else (start, content)


def closed(text: str) -> bool:
    """No inline or display math and no code fence is left open at the end of `text`."""
    return (
        text.count("\\(") == text.count("\\)")
        and text.count("\\[") == text.count("\\]")
        and (text.count("$") - text.count("\\$")) % 2 == 0
        and text.count("```") % 2 == 0
    )


def transplants(bare_rows: list[dict]) -> Iterator[dict]:
    eligible = [(r, box) for r in bare_rows if (box := closing_box(r["completion"]))]
    print(f"transplant: {len(eligible)} eligible rows, {min(TRANSPLANTS, len(eligible))} sampled")
    for base, (start, answer) in random.Random(0).sample(eligible, min(TRANSPLANTS, len(eligible))):
        prose = f"${answer}$" if re.search(r"[\\^_{]", answer) else answer
        for name, template in ENDINGS.items():
            completion = base["completion"][:start] + template.format(x=answer, prose=prose)
            yield {
                **base,
                "id": f"{base['id']}-{name}",
                "source": "transplant",
                "format": name,
                "completion": completion,
            }


def main() -> None:
    gsm8k = {normalised(g["question"]): g for g in map(json.loads, (SHARED / "math/gsm8k-test.jsonl").open())}
    math500 = {normalised(g["problem"]): g for g in map(json.loads, (SHARED / "math/MATH500.jsonl").open())}
    rows = [*bon_rows(), *processbench_rows("gsm8k", gsm8k), *processbench_rows("math", math500)]
    rows += transplants([r for r in rows if r["reference_kind"] == "bare"])
    OUT.parent.mkdir(exist_ok=True)
    with gzip.GzipFile(OUT, "wb", mtime=0) as raw:
        raw.writelines((json.dumps(r, ensure_ascii=False) + "\n").encode() for r in rows)
    print(f"wrote {len(rows)} rows to {OUT} ({OUT.stat().st_size / 1e6:.2f} MB)")
    for field in ("source", "generator", "format", "reference_kind", "label_origin"):
        counts = Counter((r[field], r["label"]) for r in rows)
        print(f"\n| {field} | rows | label true | label false |\n|---|---:|---:|---:|")
        for value in sorted({value for value, _ in counts}):
            true, false = counts[value, True], counts[value, False]
            print(f"| {value} | {true + false} | {true} | {false} |")


if __name__ == "__main__":
    main()

"""Find the program in a completion: fenced code blocks, chosen by position, size or name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rewardlab.rewards.code.languages import LANGUAGES
from rewardlab.rewards.fences import fenced_blocks

BlockChoice = Literal["last", "first", "longest", "all"]

LANGUAGE_TAGS = {"python": ("python", "py", "python3", "py3", "")} | {
    name: language.tags for name, language in LANGUAGES.items()
}


@dataclass(frozen=True, slots=True)
class CodeBlock:
    info: str
    body: str


@dataclass(frozen=True, slots=True)
class Program:
    """The code found in a completion and how it was found."""

    source: str | None
    method: str


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block, in order (see `rewardlab.rewards.fences.fenced_blocks`)."""
    return [CodeBlock(block.info, block.body) for block in fenced_blocks(text)]


def extract_program(
    text: str,
    *,
    language: str = "python",
    block: BlockChoice = "last",
    block_name: str | None = None,
    allow_unfenced: bool = False,
) -> Program:
    """The program to run.

    Args:
        language: Only blocks tagged with this language (or untagged) count.
        block: Which of several blocks: ``"last"`` (default: the final answer of a model that
            drafts first), ``"first"``, ``"longest"``, or ``"all"`` joined in order.
        block_name: Prefer the block whose info string names this file (```` ```python sol.py ````).
        allow_unfenced: With no fenced block, take the whole completion as the program.
    """
    tags = LANGUAGE_TAGS.get(language, (language, ""))
    blocks = [b for b in code_blocks(text) if (b.info.split() or [""])[0].lower() in tags]
    if block_name is not None:
        named = [b for b in blocks if block_name in b.info.split()[1:]]
        if named:
            return Program(named[-1].body, "named_block")
    if blocks:
        if block == "first":
            return Program(blocks[0].body, "first_block")
        if block == "longest":
            return Program(max(blocks, key=lambda b: len(b.body)).body, "longest_block")
        if block == "all":
            return Program("\n\n".join(b.body for b in blocks), "all_blocks")
        return Program(blocks[-1].body, "last_block")
    if allow_unfenced and text.strip():
        return Program(text, "unfenced")
    return Program(None, "none")


def job_program(text: str, extraction: Mapping[str, Any]) -> Program:
    """The program a scoring job runs, found in the job's worker (finding it reads model text, so
    it runs under the job's budget): ``text`` itself for ``{"whole": True}`` (a prompt and a
    completion that together are the program), else what `extract_program` finds with the
    ``extraction`` options. Its source is None when that is blank: there is nothing to run.

    One reader for the local job (`reward.execute`) and the SandboxFusion one
    (`sandbox_fusion.execute_remote`), so that both backends run the same program.
    """
    found = (
        Program(text, "prompt_and_completion")
        if extraction.get("whole")
        else extract_program(text, **extraction)
    )
    if found.source is None or not found.source.strip():
        return Program(None, found.method)
    return found

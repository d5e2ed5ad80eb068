"""Every code block in README.md and docs/ runs, so an example that breaks fails the tests.

One test per page; its blocks run in order, in a fresh working directory that holds a link to
the repository's ``examples/``. By the block's language:

- ``python``: executed; the blocks of a page share one namespace.
- ``pycon``: a doctest in that same namespace (``...`` matches anything; whitespace is loose).
- ``bash``: run with bash (``-e -o pipefail``), the environment's ``bin`` first on ``PATH``,
  stdout and stderr together. Every command in it must be one of `COMMANDS` (cheap, offline, done
  when they return), and not one of `REFUSED` (they download, or serve until stopped).
- ``console``: the same, for ``$ `` lines; the lines after a command are what it must print
  (doctest matching).
- ``yaml``: parsed; a mapping with a ``type`` is a reward config and must build with
  `rewardlab.build` (building checks every option; it loads no model and calls no server).
- ``json``, ``toml``: parsed.
- ``text``: not code (trees, formats, output shown for reading); not run. A command's synopsis
  written as one (``rewardlab score INPUT ... [--resume]``) may name only options the command has.

Any other language, or an indented code block, fails: every block is one of these.

A block that cannot run here - it trains, downloads, serves, needs a GPU, a cluster, an API key,
or minutes of CPU - is preceded by ``<!-- not-run: why -->``: the reason is required, and each
such block is reported as a skipped test with it. ``<!-- requires: sandbox -->`` (bubblewrap) or
``<!-- requires: model -->`` (the embedded judge model) before a block makes its page's test
need that; it is skipped where it is missing, except in CI (``CI=1``), where that fails.
"""

from __future__ import annotations

import doctest
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

import rewardlab

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
#: Commands a bash or console block may run: cheap, offline, and done when they return.
COMMANDS = frozenset({"rewardlab", "python", "cat", "head", "tail", "wc", "ls", "echo", "printf", "grep"})
#: ``rewardlab`` subcommands a block may not run unmarked.
REFUSED = {
    "fetch-model": "downloads from PyPI",
    "serve": "serves until stopped",
    "serve-model": "serves until stopped",
}
LANGUAGES = frozenset({"python", "pycon", "bash", "console", "yaml", "json", "toml", "text"})
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")
MARKER = re.compile(r"<!--\s*(not-run|requires)\s*:(.*?)-->", re.DOTALL)
README_LINES = 200


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    not_run: str | None = None  # the reason, when marked
    requires: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a page, with the marker written right before each."""
    found, marker = [], None
    for token in MarkdownIt("commonmark").parse(page.read_text()):
        if token.type == "html_block" and MARKER.fullmatch(token.content.strip()):
            marker = MARKER.fullmatch(token.content.strip())
            continue
        if token.type == "fence":
            block = Block(page, token.map[0] + 1, token.info.strip().split(" ")[0], token.content)
            if marker is not None:
                kind, text = marker.group(1), " ".join(marker.group(2).split())
                if kind == "not-run":
                    block.not_run = text
                else:
                    block.requires = text
            found.append(block)
        elif token.type == "code_block":
            found.append(Block(page, token.map[0] + 1, "<indented>", token.content))
        marker = None
    return found


ALL_BLOCKS = [block for page in PAGES for block in blocks(page)]


def test_the_docs_have_pages():
    assert len(PAGES) > 20, [str(p) for p in PAGES]


@pytest.mark.parametrize("block", ALL_BLOCKS, ids=lambda block: block.where)
def test_every_block_is_marked_well(block):
    assert block.language in LANGUAGES, (
        f"{block.where}: a code block needs one of the languages {sorted(LANGUAGES)} "
        f"(got {block.language!r}; indented code blocks are not run, fence them)"
    )
    if block.not_run is not None:
        assert len(block.not_run) >= 10, f"{block.where}: <!-- not-run: ... --> must say why"
        assert block.language != "text", f"{block.where}: a text block is never run; drop the marker"
    if block.requires is not None:
        assert block.requires in ("sandbox", "model"), f"{block.where}: requires sandbox or model"


def test_readme_is_short_and_opens_with_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_LINES, "the README is the front page; the rest goes in docs/"
    first = next(b for b in blocks(ROOT / "README.md") if b.language == "bash")
    commands = first.code.splitlines()
    assert len(commands) == 2, first.code
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in commands:
        assert command in ci, f".ci/run does not run the README's set-up command {command!r}"


def test_readme_links_resolve():
    readme = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


SYNOPSES = [b for b in ALL_BLOCKS if b.language == "text" and b.code.startswith("rewardlab ")]


@pytest.mark.parametrize("block", SYNOPSES, ids=lambda block: block.where)
def test_synopses_name_real_options(block):
    """A command's synopsis (a ``text`` block, not run) names only options the command has."""
    words = block.code.split()
    # A command's own subcommand ("rewardlab probe bias ...") is checked against its own help.
    command = words[1:3] if len(words) > 2 and re.fullmatch(r"[a-z][a-z-]*", words[2]) else words[1:2]
    help_text = subprocess.run(
        [sys.executable, "-m", "rewardlab.cli", *command, "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for option in sorted(set(re.findall(r"--[a-z][a-z0-9-]*", block.code))):
        missing = f"{block.where}: rewardlab {' '.join(command)} has no {option}"
        assert re.search(rf"{option}(?![\w-])", help_text), missing


def _model_missing() -> str | None:
    from rewardlab.llm.default_model import default_model_path
    from rewardlab.optional import MissingDependency

    try:
        default_model_path()
    except MissingDependency as error:
        return str(error)
    return None


def _missing(requirement: str) -> str | None:
    if requirement == "sandbox":
        return None if shutil.which("bwrap") else "bubblewrap (bwrap) is not installed"
    return _model_missing()


def _pages_with_blocks():
    params = []
    for page in PAGES:
        runnable = [b for b in blocks(page) if b.not_run is None and b.language != "text"]
        if not runnable:
            continue
        needs = sorted({b.requires for b in runnable if b.requires})
        params.append(
            pytest.param(page, id=str(page.relative_to(ROOT)), marks=[getattr(pytest.mark, n) for n in needs])
        )
    return params


@pytest.mark.parametrize("page", _pages_with_blocks())
def test_page_runs(page, tmp_path, monkeypatch):
    page_blocks = [b for b in blocks(page) if b.not_run is None and b.language != "text"]
    for requirement in sorted({b.requires for b in page_blocks if b.requires}):
        problem = _missing(requirement)
        if problem and not os.environ.get("CI"):
            pytest.skip(f"{page.relative_to(ROOT)} needs {requirement}: {problem}")
        assert problem is None, problem
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for block in page_blocks:
        run_block(block, namespace, tmp_path)


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.not_run is not None], ids=lambda block: block.where
)
def test_not_run(block):
    pytest.skip(f"not run: {block.not_run}")


def run_block(block: Block, namespace: dict, cwd: Path) -> None:
    if block.language == "python":
        exec(compile(block.code, block.where, "exec"), namespace)
    elif block.language == "pycon":
        run_doctest(block, namespace)
    elif block.language == "bash":
        run_shell(block, block.code, cwd)
    elif block.language == "console":
        run_console(block, cwd)
    elif block.language == "yaml":
        check_yaml(block)
    elif block.language == "json":
        json.loads(block.code)
    elif block.language == "toml":
        tomllib.loads(block.code)
    else:
        pytest.fail(f"{block.where}: no way to run a {block.language!r} block")


def run_doctest(block: Block, namespace: dict) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.code, namespace, block.where, str(block.page), block.line)
    assert test.examples, f"{block.where}: a pycon block without >>> examples"
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    namespace.update(test.globs)  # DocTest runs in a copy; later blocks see what this one made
    assert runner.failures == 0, f"{block.where}:\n" + "".join(report)


def commands_of(script: str) -> list[list[str]]:
    """Each simple command of a shell script as its words (operators and lines split commands)."""
    commands = []
    for line in script.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.commenters = "#"
        current: list[str] = []
        for token in lexer:
            if set(token) <= set(";&|()"):
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(token)
        if current:
            commands.append(current)
    # NAME=value before a command sets its environment; the command is the word after.
    return [list(itertools.dropwhile(ASSIGNMENT.fullmatch, words)) or words for words in commands]


def run_shell(block: Block, script: str, cwd: Path) -> str:
    for words in commands_of(script):
        assert words[0] in COMMANDS, (
            f"{block.where}: {words[0]!r} is not a command the docs may run unmarked "
            f"({', '.join(sorted(COMMANDS))}); mark the block <!-- not-run: why --> if it must stay"
        )
        if words[0] == "rewardlab" and len(words) > 1 and words[1] in REFUSED:
            pytest.fail(
                f"{block.where}: rewardlab {words[1]} {REFUSED[words[1]]}; mark it <!-- not-run: ... -->"
            )
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONUNBUFFERED": "1",  # stdout and stderr interleaved as a terminal shows them
    }
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"{block.where}: exit {result.returncode}\n{result.stdout[-6000:]}"
    return result.stdout


def run_console(block: Block, cwd: Path) -> None:
    """``$ command`` lines, each followed by the output it must print."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps and steps[-1][0].endswith("\\"):
            steps[-1] = (steps[-1][0] + "\n" + line, steps[-1][1])
        else:
            assert steps, f"{block.where}: a console block starts with a $ command"
            steps[-1][1].append(line)
    checker = doctest.OutputChecker()
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for command, expected in steps:
        got = run_shell(block, command, cwd)
        want = "\n".join(expected).strip() + "\n"
        if want.strip():
            assert checker.check_output(want, got, flags), (
                f"{block.where}: `{command}` printed\n{got}\nexpected\n{want}"
            )


def check_yaml(block: Block) -> None:
    config = yaml.safe_load(block.code)
    if isinstance(config, dict) and "type" in config:
        try:
            reward = rewardlab.build(config)
        except Exception as error:  # noqa: BLE001 - any failure to build is the example's
            pytest.fail(f"{block.where}: the config does not build: {type(error).__name__}: {error}")
        reward.close()

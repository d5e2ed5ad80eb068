"""Judge prompts: jinja2 templates in files, which users can override.

A template is one file with a ``system`` block and a ``user`` block; each becomes a chat message.
The built-in templates live in ``templates/`` beside the code that uses them
(``rewardlab/judges/templates/``, ``rewardlab/rubrics/templates/``). A judge's ``template`` option
takes a path to a file of one's own, and ``template_dir`` a folder searched before the built-ins
(so a file there named like a built-in replaces it).

Untrusted text reaches a template only through the ``fence`` filter (see `fence.py`: nonces are
secret, derived under a key each loaded template draws), and jinja2
never evaluates ``{{ ... }}`` inside a value, so a completion cannot inject template code either.
Rendering is strict: a misspelt variable is an error, not an empty string.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from rewardlab.errors import InvalidInput
from rewardlab.llm.fence import Fence, fence
from rewardlab.rewards.contract import message_text


class JudgePrompt:
    """One loaded template.

    Args:
        name: A built-in template name (``"pointwise_scale.jinja"``) or a path to a template file.
        template_dir: A folder searched before the built-ins.
        package: The package whose ``templates/`` folder holds the built-ins.
    """

    def __init__(
        self, name: str | Path, template_dir: str | Path | None = None, package: str = "rewardlab.judges"
    ):
        self._arguments = (name, template_dir, package)
        #: The secret that fence nonces are derived under (see `fence.py`); kept when pickled.
        self.fence_key = secrets.token_bytes(32)
        loaders: list[jinja2.BaseLoader] = []
        path = Path(name)
        if path.is_file():
            loaders.append(jinja2.FileSystemLoader(str(path.parent)))
            name = path.name
        if template_dir is not None:
            loaders.append(jinja2.FileSystemLoader(str(template_dir)))
        loaders.append(jinja2.PackageLoader(package, "templates"))
        environment = jinja2.Environment(
            loader=jinja2.ChoiceLoader(loaders),
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=False,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        environment.filters["fence"] = _fence_filter
        try:
            self.template = environment.get_template(str(name))
        except jinja2.TemplateNotFound:
            raise FileNotFoundError(f"no judge template {str(name)!r} (a path, or a built-in name)") from None
        missing = {"system", "user"} - set(self.template.blocks)
        if missing:
            raise ValueError(f"judge template {name!r} lacks the block(s) {sorted(missing)}")
        source = environment.loader.get_source(environment, str(name))[0]  # type: ignore[union-attr]
        #: Part of every cache key, so that editing a template never replays stale answers.
        self.hash = hashlib.sha256(source.encode()).hexdigest()[:16]

    def __getstate__(self) -> tuple[tuple[str | Path, str | Path | None, str], bytes]:
        # A jinja2 environment does not pickle; it is rebuilt from the arguments.
        return self._arguments, self.fence_key

    def __setstate__(self, state: tuple[tuple[str | Path, str | Path | None, str], bytes]) -> None:
        arguments, key = state
        self.__init__(*arguments)  # type: ignore[misc]
        self.fence_key = key

    def render(self, **values: Any) -> list[dict[str, str]]:
        """The chat messages for ``values``: a system message (if the block is not empty) and a
        user message."""
        return self.render_with_fences(**values)[0]

    def render_with_fences(self, **values: Any) -> tuple[list[dict[str, str]], list[Fence]]:
        """The chat messages, and the fences the template made around untrusted text, in the
        order it made them (the only ones whose quotes the verdict reader may hide, and the texts
        it checks verdicts against)."""
        made: list[Fence] = []
        context = self.template.new_context({**values, _FENCES: made, _FENCE_KEY: self.fence_key})
        system = "".join(self.template.blocks["system"](context)).strip()
        user = "".join(self.template.blocks["user"](context)).strip()
        messages = [{"role": "system", "content": system}] if system else []
        return [*messages, {"role": "user", "content": user}], made


_FENCES = "_rewardlab_fences"
_FENCE_KEY = "_rewardlab_fence_key"


@jinja2.pass_context
def _fence_filter(context: Any, text: object, label: str) -> str:
    """The ``fence`` filter: fences ``text`` under the prompt's key and records the fence for
    this rendering."""
    return fence(text, label, context.get(_FENCES), key=context.get(_FENCE_KEY))


def transcript(value: str | Sequence[Mapping[str, Any]] | None, field_name: str) -> str:
    """A prompt or completion as text for a judge: chat messages become ``role: content`` turns, so
    the judge sees who said what."""
    if value is None or isinstance(value, str):
        return value or ""
    messages = value  # a name of its own keeps mypy from widening it back to str below
    if not isinstance(messages, Sequence):
        raise InvalidInput(field_name, f"must be text or a list of chat messages, got {type(value).__name__}")
    turns = []
    for message in messages:
        text = message_text([message], roles=(), field_name=field_name)
        if text:
            turns.append(f"{message.get('role', 'unknown')}: {text}")
    return "\n\n".join(turns)

"""Griffe extension for the API reference: a docstring's ``Example:`` section is read as
``Examples:``.

Google style, as griffe parses it, knows only the plural as a section of runnable examples; the
singular becomes an admonition rendered as Markdown, where a doctest's output such as ``[1.0]``
reads as a link reference and its ``>>>`` lines as quotes. rewardlab's docstrings write the
singular, and their examples run as doctests, so they are shown as the code they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SINGULAR = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _SINGULAR.sub(r"\1Examples:", obj.docstring.value)

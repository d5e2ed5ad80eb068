"""The exploit library: built-in exploits by module, and `register_exploit` for one's own.

Built-in exploits live in one module per family (answer games, format games, grader games, length
and style, code games, invisible and look-alike characters), imported on first use of the
registry. An exploit of one's own is a function registered with a decorator; ``rewardlab probe
--import my_exploits`` imports the module that registers it::

    from rewardlab.probe import Target, register_exploit

    @register_exploit("shouting", kinds=["judge"], description="The honest answer in capitals.")
    def shouting(target: Target) -> str | None:
        return target.completion.upper()
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable

from rewardlab.probe.exploit import Exploit, Make

BUILTIN_MODULES = (
    "rewardlab.probe.answer_games",
    "rewardlab.probe.format_games",
    "rewardlab.probe.grader_games",
    "rewardlab.probe.style_games",
    "rewardlab.probe.code_games",
    "rewardlab.probe.unicode_games",
)

_EXPLOITS: dict[str, Exploit] = {}


def register_exploit(
    name: str, *, kinds: Iterable[str], answer_aware: bool = False, description: str | None = None
) -> Callable[[Make], Make]:
    """Function decorator that adds an exploit to the library.

    Args:
        name: The exploit's short name; must be new.
        kinds: The reward kinds it targets (`rewardlab.probe.exploit.KINDS`, or a kind of one's
            own that a reward declares in ``probe_kinds``); ``any`` targets every reward.
        answer_aware: True when the function inserts ``target.gold`` (the probe then also calls
            it with a decoy for the control); False for a blind exploit, which gets no gold.
        description: One line for reports; default: the first line of the function's docstring.
    """
    kinds = frozenset(kinds)
    if not kinds:
        raise ValueError(f"exploit {name!r}: kinds must name at least one reward kind (or 'any')")

    def decorate(make: Make) -> Make:
        if name in _EXPLOITS:
            raise ValueError(f"an exploit is already registered as {name!r}")
        text = description or (inspect.getdoc(make) or name).split("\n\n")[0].replace("\n", " ")
        _EXPLOITS[name] = Exploit(name, kinds, answer_aware, text, make)
        return make

    return decorate


def registered_exploits() -> dict[str, Exploit]:
    """Every exploit in the library by name, in the order they were registered (the built-in
    ones by family)."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    return dict(_EXPLOITS)


def exploits_named(names: Iterable[str]) -> list[Exploit]:
    """The exploits of ``names``, in that order; `KeyError` for an unknown name, which lists the
    known ones."""
    known = registered_exploits()
    names = list(names)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise KeyError(f"unknown exploit {unknown[0]!r}; one of: {', '.join(sorted(known))}")
    return [known[name] for name in names]

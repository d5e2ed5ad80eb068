"""Names a package offers, imported on first use (PEP 562), so that importing a package - or
``rewardlab`` itself - loads no model, server or training library until one is asked for."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for ``exports`` (name -> defining module).

    Example:
        >>> getattr_, dir_ = lazy_exports("pkg", {}, {"sqrt": "math"})
        >>> getattr_("sqrt")(4.0)
        2.0
    """

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next lookup finds it directly
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *exports})

    return getattr_, dir_

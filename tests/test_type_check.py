"""The public API type-checks strictly: mypy, with the project's configuration, on the modules a
user imports from. The rest of the package is checked too, at the baseline, by CI's ``mypy``."""

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The modules whose every name a user may import, and so annotate against.
PUBLIC_API = (
    "rewardlab",
    "rewardlab.errors",
    "rewardlab.lazy_exports",
    "rewardlab.testing",
    "rewardlab.rewards.contract",
    "rewardlab.integrations.trl",
    "rewardlab.offline.runner",
    "rewardlab.offline.rows",
    "rewardlab.offline.summary",
    "rewardlab.llm.client",
    "rewardlab.llm.backend",
)
#: The per-module flags of ``mypy --strict``.
STRICT_FLAGS = {
    "disallow_any_generics": True,
    "disallow_subclassing_any": True,
    "disallow_untyped_calls": True,
    "disallow_untyped_defs": True,
    "disallow_incomplete_defs": True,
    "disallow_untyped_decorators": True,
    "warn_return_any": True,
    "implicit_reexport": False,
}


def test_the_public_api_is_configured_strict():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    strict = [o for o in config["overrides"] if set(PUBLIC_API) <= set(o["module"])]
    assert strict, "no override in [tool.mypy] names every public-API module"
    assert {flag: strict[0].get(flag) for flag in STRICT_FLAGS} == STRICT_FLAGS


def test_the_public_api_type_checks_strictly():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it comes with the test extra)")
    modules = [argument for module in PUBLIC_API for argument in ("-m", module)]
    # Imported modules are analysed for their types, but their own errors are not reported
    # here: CI's whole-package run reports those.
    command = [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-warn-unused-configs", *modules]
    result = subprocess.run(command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr

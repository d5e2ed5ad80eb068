"""Code execution needs bubblewrap, and programs in other languages their compilers (see
`rewardlab.rewards.code.languages`). Without them these tests are skipped with the reason, except
in CI (CI=1), where a missing sandbox or compiler is a failure."""

import os

import pytest

from rewardlab.errors import SandboxUnavailable
from rewardlab.rewards.code.sandbox import Sandbox

NEEDS_SANDBOX = {
    "test_code_reward.py",
    "test_hostile.py",
    "test_humaneval.py",
    "test_languages.py",
    "test_hostile_languages.py",
    "test_hostile_round24.py",
}
#: Files that run programs in other languages, which also need their compilers (see `languages`).
NEEDS_TOOLCHAINS = {"test_languages.py", "test_hostile_languages.py", "test_hostile_round24.py"}


def _missing_toolchains():
    from rewardlab.rewards.code.languages import LANGUAGES

    missing = []
    for language in LANGUAGES.values():
        try:
            language.check()
        except SandboxUnavailable as error:
            missing.append(str(error))
    return missing


def pytest_collection_modifyitems(config, items):
    try:
        Sandbox().check()
    except SandboxUnavailable as error:
        if os.environ.get("CI"):
            raise
        skip = pytest.mark.skip(reason=f"no sandbox on this machine: {error}")
        for item in items:
            if item.fspath.basename in NEEDS_SANDBOX:
                item.add_marker(skip)
        return
    if not any(item.fspath.basename in NEEDS_TOOLCHAINS for item in items):
        return
    missing = _missing_toolchains()
    if missing and os.environ.get("CI"):
        raise SandboxUnavailable("; ".join(missing))
    if missing:
        skip = pytest.mark.skip(reason=f"compilers missing on this machine: {'; '.join(missing)}")
        for item in items:
            if item.fspath.basename in NEEDS_TOOLCHAINS:
                item.add_marker(skip)

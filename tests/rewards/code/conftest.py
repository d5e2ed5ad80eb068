"""Code execution needs bubblewrap. Without it these tests are skipped with the reason, except
in CI (CI=1), where a missing sandbox is a failure."""

import os

import pytest

from rewardlab.errors import SandboxUnavailable
from rewardlab.rewards.code.sandbox import Sandbox

NEEDS_SANDBOX = {"test_code_reward.py", "test_hostile.py", "test_humaneval.py"}


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

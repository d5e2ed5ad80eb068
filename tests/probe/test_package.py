"""``rewardlab.probe`` names what it offers, and importing it imports none of its modules."""

import subprocess
import sys

import rewardlab.probe


def test_every_exported_name_resolves():
    for name in rewardlab.probe.__all__:
        value = getattr(rewardlab.probe, name)
        assert getattr(value, "__name__", name) == name


def test_importing_the_package_loads_no_exploit_or_reward():
    code = (
        "import sys, rewardlab.probe;"
        "print(sorted(m for m in sys.modules if m.startswith('rewardlab.probe.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

"""Each subpackage names what it offers in ``__all__``; every name resolves, on first use, to the
object its defining module holds, and importing the package alone imports none of them."""

import importlib
import pkgutil
import subprocess
import sys

import pytest

PACKAGES = [
    "rewards", "llm", "judges", "rubrics", "prm", "reward_models", "benchmarks", "serving", "integrations"
]  # fmt: skip


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves(package):
    module = importlib.import_module(f"rewardlab.{package}")
    assert module.__all__, package
    for name in module.__all__:
        value = getattr(module, name)
        assert getattr(value, "__name__", name) == name, (package, name)
        assert name in dir(module)
    # A name shared with a submodule is replaced by the module once anything imports that module.
    assert not set(module.__all__) & {found.name for found in pkgutil.iter_modules(module.__path__)}
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


def test_importing_a_package_imports_none_of_its_modules():
    code = (
        "import sys, rewardlab.judges, rewardlab.llm, rewardlab.prm, rewardlab.serving;"
        "print(sorted(m for m in sys.modules if m.startswith(('rewardlab.judges.', 'rewardlab.llm.', "
        "'rewardlab.prm.', 'rewardlab.serving.'))));"
        "print('torch' in sys.modules, 'fastapi' in sys.modules, 'litellm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "False False False"]

"""The package's layers, checked from the source: a module imports only from its own package or
from a lower layer (imports inside functions count too), so that the tree shows the
architecture and a rule verifier can never pull in a judge, a judge TRL, or a server the CLI."""

import ast
import pathlib

import pytest

import rewardlab

#: Lowest first. Modules of one package may import each other; across packages only downwards.
LAYERS = [
    {
        "errors",
        "optional",
        "cache_location",
        "sockets",
        "sqlite_file",
        "json_file",
        "arguments",
        "request_body",
        "lazy_exports",
    },
    {"rewards"},
    {"llm"},
    {"judges"},
    {"rubrics", "prm"},
    {"reward_models"},
    {"offline", "testing"},
    {"benchmarks", "probe", "integrations"},
    {"serving"},
    {"cli"},
]
LEVEL = {package: level for level, packages in enumerate(LAYERS) for package in packages}
ROOT = pathlib.Path(rewardlab.__file__).parent
MODULES = sorted(path for path in ROOT.rglob("*.py") if path != ROOT / "__init__.py")


def _package(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).parts[0].removesuffix(".py")


def _imported(source: str, module: str) -> set[str]:
    """The rewardlab packages that ``source`` (of ``module``) imports from, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".")[: -node.level] if node.level else []
            names = [".".join([*base, node.module] if node.module else base)]
        found.update(name.split(".")[1] for name in names if name.startswith("rewardlab."))
    return found


def test_every_package_has_a_layer():
    assert {_package(path) for path in MODULES} <= set(LEVEL)


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(ROOT)))
def test_imports_only_go_down(path):
    own = _package(path)
    module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    upward = sorted(
        package
        for package in _imported(path.read_text(), module) - {own}
        if LEVEL.get(package, len(LAYERS)) >= LEVEL[own] and LEVEL[own] > 0
    )
    assert not upward, f"{path.relative_to(ROOT)} ({own}, layer {LEVEL[own]}) imports {upward}"


def test_the_check_sees_imports_inside_functions_and_relative_ones():
    source = "def late():\n    from rewardlab.prm.models import load_model\nfrom ..judges import judge\n"
    assert _imported(source, "rewardlab.rewards.steps") == {"prm", "judges"}

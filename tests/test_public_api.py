"""The package's public names: all importable from `rewardlab`, the heavy ones only on first use."""

import doctest
import json
import subprocess
import sys

import rewardlab


def test_every_public_name_resolves_to_what_its_module_defines():
    for name in rewardlab.__all__:
        value = getattr(rewardlab, name)
        assert getattr(value, "__name__", name) == name, name
    assert set(rewardlab.__all__) <= set(dir(rewardlab))
    assert set(rewardlab._LAZY) <= set(rewardlab.__all__)


def test_importing_the_package_pulls_in_no_model_server_or_training_dependency():
    probe = "import sys, json, rewardlab; print(json.dumps(sorted(sys.modules)))"
    loaded = set(
        json.loads(
            subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
        )
    )
    heavy = {"torch", "transformers", "trl", "fastapi", "uvicorn", "litellm", "openai", "sympy", "pydantic"}
    assert not loaded & heavy
    assert "rewardlab.judges.pointwise" not in loaded and "rewardlab.serving.remote" not in loaded
    # Asking for a name imports its module.
    probe = "import sys, rewardlab; rewardlab.RemoteReward; print('rewardlab.serving.remote' in sys.modules)"
    assert (
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "True"
    )


def test_an_unknown_name_is_an_attribute_error():
    try:
        rewardlab.NoSuchReward  # noqa: B018
    except AttributeError as error:
        assert "NoSuchReward" in str(error)
    else:
        raise AssertionError("no AttributeError")


def test_the_package_docstring_example_runs():
    assert doctest.testmod(rewardlab, raise_on_error=False).failed == 0


def test_the_package_says_it_is_typed():
    # PEP 561: type checkers read a package's annotations only when it ships py.typed.
    from importlib.resources import files

    assert files("rewardlab").joinpath("py.typed").is_file()

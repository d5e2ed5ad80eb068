"""GGUF files, converted once to a transformers folder.

transformers reads GGUF in pure Python: parsing the vocabulary and mapping tensor names takes
about 20 s for SmolLM2-135M on these machines, on every load, while loading the same weights from
safetensors takes under a second. So the first load de-quantizes the file and saves a folder in
the cache, keyed by the file's content hash; later loads, and other processes (the
``serve-model`` server beside a test run), use that folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import shutil
import tempfile
from pathlib import Path

from rewardlab.cache_location import cache_dir
from rewardlab.optional import require


def converted_folder(gguf_file: Path) -> Path:
    """A transformers folder holding ``gguf_file``'s model and tokenizer, converted on first use."""
    target = cache_dir() / "models" / f"{gguf_file.stem}-{_content_hash(gguf_file)}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be converting the same file
        if not (target / "config.json").is_file():
            _convert(gguf_file, target)
    return target


def _content_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _convert(gguf_file: Path, target: Path) -> None:
    torch = require("torch", "loading a GGUF model")
    transformers = require("transformers", "loading a GGUF model")
    require("gguf", "loading a GGUF model")
    options = {"gguf_file": gguf_file.name}
    tokenizer = transformers.AutoTokenizer.from_pretrained(gguf_file.parent, **options)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        gguf_file.parent, dtype=torch.float32, **options
    )
    # The weights are de-quantized now; transformers refuses to save a model that still says
    # it is GGUF-quantized.
    model.hf_quantizer = None
    with contextlib.suppress(AttributeError):
        del model.config.quantization_config
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)

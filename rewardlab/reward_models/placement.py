"""Where a learned reward model runs and in which precision, unless its config says.

Chosen when the model is first loaded, not when the reward is built: a reward built on a laptop
and shipped to a GPU worker (TRL's processes, a Ray actor) runs on that worker's GPU.
"""

from __future__ import annotations

from typing import Literal

from rewardlab.optional import require

Dtype = Literal["float32", "bfloat16", "float16"]


def placement(device: str | None, dtype: Dtype | None) -> tuple[str, Dtype]:
    """``(device, dtype)``: the first CUDA device and bfloat16 when there is one (float32 where
    it lacks bfloat16), else the CPU and float32 (bfloat16 matrix products are slow on most CPUs);
    a given device or dtype is kept."""
    torch = require("torch", "learned reward models")
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype is None:
        on_gpu = device.startswith("cuda") and torch.cuda.is_available()
        dtype = "bfloat16" if on_gpu and torch.cuda.is_bf16_supported() else "float32"
    return device, dtype

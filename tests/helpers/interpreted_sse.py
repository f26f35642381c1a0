"""Run embreg's Triton SSE-SE sampler under Triton's interpreter, on CPU tensors, in a fresh process.

``TRITON_INTERPRET=1`` must be set before Triton is first imported (Triton's own jitted helpers, such as its
Philox, are built at import), so the calls run in a child process. Each call is the keyword arguments of
:func:`embreg.sse._cuda_sampler.launch_sse_se` without ``kernel``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch


def run_interpreted(calls: list[dict]) -> list[torch.Tensor]:
    """The sampler's output for each call, in order."""
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(calls, Path(tmp) / "calls.pt")
        env = {**os.environ, "TRITON_INTERPRET": "1"}
        subprocess.run([sys.executable, __file__, tmp], env=env, check=True, timeout=600)
        return torch.load(Path(tmp) / "outputs.pt")


if __name__ == "__main__":
    from embreg.sse import _cuda_sampler

    folder = Path(sys.argv[1])
    kernel = _cuda_sampler._compile()
    outputs = [_cuda_sampler.launch_sse_se(kernel, **call) for call in torch.load(folder / "calls.pt")]
    torch.save(outputs, folder / "outputs.pt")

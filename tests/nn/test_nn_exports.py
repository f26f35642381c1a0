"""``embreg.nn`` re-exports the blocks of every one of its modules and subpackages, and stays a low layer."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys

import pytest
import torch

import embreg.nn

CHILDREN = sorted(info.name for info in pkgutil.iter_modules(embreg.nn.__path__) if not info.name.startswith("_"))
"""The public modules and subpackages of ``embreg.nn`` (``attention``, ``crf``, ``decoding``, ...)."""


def test_the_short_imports_reach_crf_highway_and_additive_attention() -> None:
    from embreg.nn import CRF, AdditiveAttention, Highway
    from embreg.nn.attention.additive import AdditiveAttention as additive_module_class
    from embreg.nn.connections.highway_layer import HighwayLayer
    from embreg.nn.crf.module import CRF as crf_module_class

    assert CRF is crf_module_class and AdditiveAttention is additive_module_class and Highway is HighwayLayer
    crf = CRF(3)
    layer = Highway(torch.nn.Linear(4, 4), 4, 4)
    attention = AdditiveAttention(4, 4, 5)
    assert crf.decode(torch.randn(2, 6, 3)).shape == (2, 6)
    assert layer(torch.randn(2, 4)).shape == (2, 4)
    context, weights = attention(torch.randn(2, 4), torch.randn(2, 6, 4))
    assert context.shape == (2, 4) and weights.shape == (2, 6)


def test_every_name_in_all_is_importable_from_embreg_nn() -> None:
    assert len(set(embreg.nn.__all__)) == len(embreg.nn.__all__), "a name is listed twice"
    namespace: dict[str, object] = {}
    exec(f"from embreg.nn import {', '.join(embreg.nn.__all__)}", namespace)
    assert all(name in namespace for name in embreg.nn.__all__)


def test_the_children_are_found() -> None:
    assert {"attention", "connections", "crf", "decoding", "layer_stack", "packed_dropout"} <= set(CHILDREN)


@pytest.mark.parametrize("child", CHILDREN)
def test_each_module_declares_all_and_embreg_nn_reexports_it(child: str) -> None:
    module = importlib.import_module(f"embreg.nn.{child}")
    assert hasattr(module, "__all__"), f"embreg.nn.{child} declares no __all__"
    missing = sorted(set(module.__all__) - set(embreg.nn.__all__))
    assert not missing, f"embreg.nn.__all__ lacks {missing} of embreg.nn.{child}"
    for name in module.__all__:
        assert getattr(embreg.nn, name) is getattr(module, name), name


def test_importing_embreg_nn_loads_no_higher_layer_of_embreg() -> None:
    code = (
        "import sys, embreg.nn\n"
        "print(sorted(m for m in sys.modules if m.startswith('embreg.') and not m.startswith('embreg.nn')))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['embreg.errors']"

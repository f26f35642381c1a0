"""The README's Python examples run as written, and .ci/run runs the README's test command."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)


@pytest.mark.integration
def test_readme_python_examples_run():
    blocks = _python_blocks()
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    assert tuple(namespace["vectors"].shape) == (32, 20, 64)
    plan = namespace["plan"]  # the numbers the README states under its mixed-dimension example
    assert (plan.num_parameters, plan.uniform_num_parameters) == (22_741, 39_375)
    assert (plan.dims[1][0], plan.dims[1][-1], plan.base_dim) == (15, 5, 15)


def test_ci_runs_the_readme_test_command():
    lines = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert lines[-1] in (ROOT / "README.md").read_text()

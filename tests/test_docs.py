"""The Python examples of the user guide and the contributor page run as written; the pages name real things."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["docs/guide.md", "docs/adding-a-technique.md"]


def _python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), flags=re.S)


@pytest.mark.integration
@pytest.mark.parametrize("page", PAGES)
def test_python_examples_run(page):
    blocks = _python_blocks(page)
    assert blocks, f"{page} has no Python example"
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, page, "exec"), namespace)


def test_guide_names_every_task_and_cli_command():
    from embreg.cli import build_parser
    from embreg.registry import REGISTRY

    text = (ROOT / "docs/guide.md").read_text()
    for task in REGISTRY.names("task"):
        assert task in text, f"the guide does not mention task {task!r}"
    commands = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001 - argparse keeps them here
    for command in commands:
        assert f"embreg {command}" in text, f"the guide does not show 'embreg {command}'"


def test_contributor_page_names_files_that_exist():
    text = (ROOT / "docs/adding-a-technique.md").read_text()
    paths = set(re.findall(r"`((?:src|tests|studies|docs)/[\w./-]+\.(?:py|yaml|md))`", text))
    assert paths, "the page names no files"
    missing = [p for p in paths if "<" not in p and not (ROOT / p).exists()]
    assert not missing, f"named files that do not exist: {missing}"

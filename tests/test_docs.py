"""The Python examples of the user guide, the Python API page and the contributor page run as written; the pages name
real things."""

import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["docs/guide.md", "docs/python-api.md", "docs/serving.md", "docs/adding-a-technique.md"]


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
    if page == "docs/python-api.md":  # the Hugging Face Trainer section trained with LNSR's penalty
        assert namespace["trainer"].state.global_step == 4 and namespace["trainer"].last_penalty > 0


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


# -- every repository path the README and the docs name exists -------------------------------------------------------


def top_level_entries(root: Path) -> list[str]:
    """First path components that make a backticked span a repository path: the entries of ``root`` but ``.git``
    and those its ``.gitignore`` names (a run's output such as ``runs/``, which ``embreg demo`` writes into the
    repository root, is no repository folder), and ``embreg`` (the package, under src/)."""
    ignore = root / ".gitignore"
    patterns = [line.strip().strip("/") for line in ignore.read_text().splitlines()] if ignore.is_file() else []
    patterns = [p for p in patterns if p and not p.startswith(("#", "!")) and "/" not in p]
    return sorted(
        {p.name for p in root.iterdir() if p.name != ".git" and not any(fnmatch(p.name, q) for q in patterns)}
        | {"embreg"}
    )


TOP_LEVEL = top_level_entries(ROOT)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"(?<!`)`([^`\s]+)`(?!`)")
FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)


def _doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _checked_prefix(path: str) -> str:
    """The part of a path that must exist: all of it, or, for a template (``docs/results/<name>/``) or a glob
    (``*/summary.json``), the folder before its first placeholder."""
    cut = min((i for i in (path.find(c) for c in "<*{[") if i >= 0), default=len(path))
    return path if cut == len(path) else path[: path.rfind("/", 0, cut) + 1]


def repository_paths(page: Path, top_level: list[str] = TOP_LEVEL) -> list[tuple[str, Path]]:
    """``(as written, resolved)`` for every repository path a markdown page names outside its fenced code blocks.

    A path is (1) the target of a relative link ``[text](target)`` (not ``http(s):``, ``mailto:`` or ``#anchor``),
    resolved from the page's folder, or (2) a backticked span without spaces whose first component is a top-level
    entry of the repository (``src/``, ``docs/``, ``studies/``, ``README.md``, ...) or ``embreg/`` (the package,
    resolved under ``src/``), or which starts with ``../``: resolved from the repository root, or from the page's
    folder for a span that starts with ``../``. Templates and globs are checked up to their first placeholder.
    """
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    found: list[tuple[str, Path]] = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:|#", target):
            continue
        target = target.split("#")[0]
        found.append((target, page.parent / _checked_prefix(target)))
    for span in CODE_SPAN.findall(text):
        first = span.split("/")[0]
        if span.startswith("../"):
            found.append((span, page.parent / _checked_prefix(span)))
        elif "/" in span and first in top_level or span in top_level:
            base = ROOT / "src" if first == "embreg" else ROOT
            found.append((span, base / _checked_prefix(span.rstrip(":,."))))
    return found


@pytest.mark.parametrize("page", _doc_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    bad = []
    for written, path in repository_paths(page):
        resolved = path.resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            bad.append(written)
    assert not bad, f"{page.relative_to(ROOT)} names paths that are not in the repository: {sorted(set(bad))}"


def test_a_run_folder_in_the_repository_root_is_no_repository_path(tmp_path: Path) -> None:
    """README command 1 (``embreg demo``) leaves ``runs/`` in the repository root; the path check of command 2
    must still pass, whichever ran first: pages name ``runs/mf`` as an example output, not a repository file."""
    (tmp_path / ".gitignore").write_text("__pycache__/\nruns/\n/.whl/\n")
    for folder in ("src", "docs", "runs", "__pycache__"):
        (tmp_path / folder).mkdir()
    (tmp_path / "README.md").write_text("`embreg run mf --out runs/mf`, then `runs/mf/metrics.json` and `docs/x.md`\n")
    top_level = top_level_entries(tmp_path)
    assert top_level == [".gitignore", "README.md", "docs", "embreg", "src"]
    assert [w for w, _ in repository_paths(tmp_path / "README.md", top_level)] == ["docs/x.md"]
    runs = ROOT / "runs"
    made = not runs.exists()
    runs.mkdir(exist_ok=True)  # as after README command 1
    try:
        assert "runs" not in top_level_entries(ROOT)
        for page in _doc_pages():
            test_every_repository_path_a_page_names_exists(page)
    finally:
        if made:
            runs.rmdir()


def test_the_path_rule_sees_links_spans_templates_and_outside_paths(tmp_path: Path) -> None:
    text = (
        "[g](guide.md) [x](https://x.org) `src/embreg/cli.py` `embreg/sse/csrc/sse_sampler.cpp` "
        "`docs/results/<name>/README.md` `../shared/papers/` `config.yaml` `--set a/b`\n```\n`src/nothing.py`\n```\n"
    )
    fake = tmp_path / "probe.md"
    fake.write_text(text)
    found = repository_paths(fake)
    written = [w for w, _ in found]
    assert written == [
        "guide.md",
        "src/embreg/cli.py",
        "embreg/sse/csrc/sse_sampler.cpp",
        "docs/results/<name>/README.md",
        "../shared/papers/",
    ]
    resolved = dict(found)
    assert resolved["embreg/sse/csrc/sse_sampler.cpp"].exists()
    assert resolved["docs/results/<name>/README.md"] == ROOT / "docs/results/"


# -- the papers: one list in code, the same on docs/papers.md ---------------------------------------------------------


def _papers_table() -> dict[str, list[str]]:
    rows = re.findall(r"^\| `([\w.-]+\.txt)` \| (.+?) \|$", (ROOT / "docs/papers.md").read_text(), flags=re.M)
    return {key: [cell.strip() for cell in rest.split(" | ")] for key, rest in rows}


def test_docs_papers_lists_every_paper_of_embreg_papers_with_title_authors_year():
    from embreg.papers import PAPERS

    table = _papers_table()
    assert list(table) == [p.key for p in PAPERS], "docs/papers.md and embreg.papers list different papers"
    for paper in PAPERS:
        title, authors, year, venue = table[paper.key]
        assert (title, authors, year, venue) == (paper.title, paper.authors, str(paper.year), paper.venue), paper.key
        assert f"**`{paper.key}`**" in (ROOT / "docs/papers.md").read_text(), f"no paragraph on {paper.key}"


def test_every_paper_key_the_code_cites_is_listed():
    """Study files and registry references cite papers by key; each key is one of docs/papers.md's."""
    from embreg.papers import PAPER_KEYS
    from embreg.registry import REGISTRY, SLOTS

    cited = {spec.split()[1] for spec in (ROOT / "studies").glob("*.yaml") for spec in [_paper_line(spec)]}
    assert cited <= set(PAPER_KEYS), f"studies cite papers not in docs/papers.md: {sorted(cited - set(PAPER_KEYS))}"
    for slot in SLOTS:
        for name in REGISTRY.names(slot):
            named = set(re.findall(r"[\w-]+\.txt", REGISTRY.get(slot, name).reference))
            assert named <= set(PAPER_KEYS), f"{slot} {name!r} cites {sorted(named - set(PAPER_KEYS))}"


def _paper_line(study: Path) -> str:
    return next(line for line in study.read_text().splitlines() if line.startswith("paper:"))


def test_the_readme_and_guide_cite_papers_by_authors_and_year_and_link_the_list():
    for page in ("README.md", "docs/guide.md", "docs/architecture.md"):
        text = (ROOT / page).read_text()
        assert "papers.md" in text, f"{page} does not link docs/papers.md"
    readme = " ".join((ROOT / "README.md").read_text().split())
    for cite in (
        "Wu et al., 2019",
        "Ginart et al., 2019",
        "Wei, Kakade and Ma, 2020",
        "Hua et al., 2021",
        "Ruder, 2017",
    ):
        assert cite in readme

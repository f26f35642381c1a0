"""The C++ kernels' sources keep the rules that make their errors safe on every host (see
src/embreg/_csrc/embreg_errors.h): checks are ``EMBREG_CHECK`` and no message goes through an iostream, every
function a kernel binds is wrapped by ``EMBREG_GUARDED``, and the shared header enters each kernel's build key, so
editing it rebuilds every kernel."""

from __future__ import annotations

import re
from pathlib import Path

from embreg import _native
from embreg.embeddings import _kernel as md_kernel
from embreg.models import mf_fused_step
from embreg.sse import _kernel as sse_kernel

SOURCES = sorted((Path(_native.__file__).parent).glob("*/csrc/*.cpp"))
# Ways of building a message through an iostream: the checks and formatters of PyTorch (c10::str) and the streams.
IOSTREAM_FORMATTING = re.compile(
    r"\b(TORCH_CHECK\w*|TORCH_INTERNAL_ASSERT\w*|TORCH_WARN\w*|AT_ERROR|AT_ASSERT\w*|c10::str|"
    r"std::(?:[io]?stringstream|ostream|cout|cerr|clog))\b"
)


def code_lines(path: Path) -> list[tuple[int, str]]:
    """The file's lines without their ``//`` comments, numbered from 1."""
    return [(number, line.split("//")[0]) for number, line in enumerate(path.read_text().splitlines(), 1)]


def iostream_formatting(path: Path) -> list[tuple[int, str]]:
    """``(line number, what)`` for each use of :data:`IOSTREAM_FORMATTING` in the file's code."""
    return [
        (number, match.group(0)) for number, line in code_lines(path) for match in IOSTREAM_FORMATTING.finditer(line)
    ]


def test_there_are_three_kernel_sources() -> None:
    assert [p.name for p in SOURCES] == ["md_lookup.cpp", "mf_step.cpp", "sse_sampler.cpp"]


def test_no_kernel_formats_a_message_through_an_iostream() -> None:
    sources = [*SOURCES, *sorted(_native.SHARED_HEADERS.glob("*.h"))]
    found = [f"{path.name}:{number}: {what}" for path in sources for number, what in iostream_formatting(path)]
    assert found == []
    checks = sum(line.count("EMBREG_CHECK(") for path in SOURCES for _, line in code_lines(path))
    assert checks >= 30


def test_the_rule_finds_torch_check_and_streams(tmp_path) -> None:
    sample = tmp_path / "k.cpp"
    sample.write_text('TORCH_CHECK(n > 0, "n ", n);  // TORCH_CHECK in a comment is fine\nstd::ostringstream s;\n')
    assert [what for _, what in iostream_formatting(sample)] == ["TORCH_CHECK", "std::ostringstream"]


def test_every_bound_function_is_guarded() -> None:
    for source in SOURCES:
        text = source.read_text()
        bindings = re.findall(r"m\.def\(\s*\"\w+\",\s*([^,]+),", text)
        assert bindings, source.name
        assert all(b.startswith("EMBREG_GUARDED(") for b in bindings), (source.name, bindings)
        assert '#include "embreg_errors.h"' in text, source.name


def test_the_shared_header_is_part_of_every_build_key(monkeypatch, tmp_path) -> None:
    kernels = [sse_kernel._KERNEL, md_kernel._KERNEL, mf_fused_step._KERNEL]
    assert all(k.source in SOURCES for k in kernels)
    seen: list[bytes] = []
    real = Path.read_bytes

    def spy(path: Path) -> bytes:
        if path.parent == _native.SHARED_HEADERS:
            seen.append(path.name.encode())
        return real(path)

    monkeypatch.setattr(Path, "read_bytes", spy)
    monkeypatch.setenv("EMBREG_KERNEL_DIR", str(tmp_path))
    monkeypatch.setattr("torch.utils.cpp_extension.load", lambda **kwargs: kwargs)
    for kernel in kernels:
        built = kernel._build()
        assert str(_native.SHARED_HEADERS) in built["extra_include_paths"]
    assert seen.count(b"embreg_errors.h") == len(kernels)

"""``benchmarks/gpu_nlp_check.py`` without a GPU: its test selection, its dry run, its refusal to run without CUDA,
and the test page it writes from a JUnit report."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_nlp_check.py"


@pytest.fixture(scope="module")
def check():
    return load_script(SCRIPT)


def test_the_selection_keeps_the_nlp_families_and_files(check) -> None:
    families = check.nlp_families()
    assert {"transformer-nmt", "encoder-mlm", "bilstm-crf"} <= set(families)
    assert not {"mf", "bpr", "dlrm", "sasrec"} & set(families)
    collected = [
        "tests/gpu/test_gpu_families.py::test_family[transformer-nmt-bf16]",
        "tests/gpu/test_gpu_families.py::test_fp16[encoder-mlm]",
        "tests/gpu/test_gpu_families.py::test_family[mf-fp32]",
        "tests/gpu/test_gpu_families.py::test_a_checkpoint_resumes_across_devices[cuda-cpu]",
        "tests/gpu/test_gpu_kernels.py::test_sse_on_cuda",
        "tests/gpu/test_gpu_translation.py::test_loss",
        "tests/gpu/test_gpu_crf.py::test_crf[bio]",
    ]
    assert check.select_tests(collected, families) == [collected[0], collected[1], collected[5], collected[6]]


def test_the_dry_run_lists_the_tests_and_checks_the_study(check, capsys) -> None:
    assert check.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "test_family_trains_a_step_and_evaluates_on_cuda[transformer-nmt-fp32]" in out
    assert "test_gpu_translation.py::test_greedy_and_beam_decoding_on_cuda_agree_with_the_cpu" in out
    assert "study translation-sse-gpu: 11 runs" in out  # 5 seeds x 2 trained variants + the lexicon once
    assert "study run" in out and "--workers 6" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where torch sees no CUDA device")
def test_without_cuda_it_refuses_to_run(check, capsys) -> None:
    assert check.main(["--skip-tests"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_bad_arguments_are_refused(check) -> None:
    with pytest.raises(SystemExit):
        check.main(["--workers", "0", "--dry-run"])


def test_the_test_page_reads_a_junit_report(check, tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.gpu.test_gpu_crf" name="test_crf[bio]" />'
        '<testcase classname="tests.gpu.test_gpu_translation" name="test_loss"><failure message="x" /></testcase>'
        '<testcase classname="tests.gpu.test_gpu_families" name="t[mlm]"><skipped message="no data" /></testcase>'
        "</testsuite></testsuites>"
    )
    outcomes = check.junit_outcomes(report)
    assert outcomes == {
        "tests.gpu.test_gpu_crf::test_crf[bio]": "passed",
        "tests.gpu.test_gpu_translation::test_loss": "failed",
        "tests.gpu.test_gpu_families::t[mlm]": "skipped: no data",
    }
    page = check.tests_markdown({"outcomes": outcomes, "returncode": 1, "seconds": 12.0, "machine": "H200"})
    assert "3 tests, exit status 1, 12 s: 1 failed, 1 passed, 1 skipped" in page

"""Where the C++ kernels are cached and how they are found there: ``EMBREG_HOME``, a read-only cache that holds the
built kernel, the console line of a first build, and the record of which backend each kernel took."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from embreg import _native
from embreg.errors import EmbregError
from embreg.recipes import load_recipe
from embreg.recipes.run import run_single
from embreg.sse import _kernel


def _built_sse_kernel():
    try:
        return _kernel._KERNEL._build()  # the cached build (compiled once per machine)
    except Exception as error:  # pragma: no cover - depends on the machine's compiler
        pytest.skip(f"the SSE kernel cannot be built here: {error}")


def _no_compiler(**kwargs):
    raise AssertionError("nothing may be compiled here")


def test_the_cache_follows_embreg_home_unless_embreg_kernel_dir_is_set(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("EMBREG_KERNEL_DIR", raising=False)
    monkeypatch.setenv("EMBREG_HOME", str(tmp_path / "home"))
    assert _native.kernel_dir() == tmp_path / "home" / "kernels"
    monkeypatch.setenv("EMBREG_KERNEL_DIR", str(tmp_path / "elsewhere"))
    assert _native.kernel_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("EMBREG_KERNEL_DIR")
    monkeypatch.delenv("EMBREG_HOME")
    assert _native.kernel_dir() == Path("~/.cache/embreg/kernels").expanduser()


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_read_only_cache_holding_the_built_kernel_is_used(monkeypatch, code: int) -> None:
    built = _built_sse_kernel()
    monkeypatch.setenv("EMBREG_KERNEL_DIR", str(Path(built.__file__).parent.parent))

    def unwritable(path, **kwargs):  # what creating the lock file gives in a read-only cache (also as root)
        raise OSError(code, "cannot write", str(path))

    monkeypatch.setattr(_native, "hold_lock", unwritable)
    monkeypatch.setattr("torch.utils.cpp_extension.load", _no_compiler)
    module = _kernel._KERNEL._build()
    assert module.__file__ == built.__file__ and hasattr(module, "sse_se")


def test_a_read_only_cache_without_the_kernel_says_what_to_do(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("EMBREG_KERNEL_DIR", str(tmp_path))

    def unwritable(path, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(_native, "hold_lock", unwritable)
    monkeypatch.setattr("torch.utils.cpp_extension.load", _no_compiler)
    with pytest.raises(EmbregError, match=rf"kernel cache {tmp_path} cannot be written .*EMBREG_KERNEL_DIR"):
        _kernel._KERNEL._build()


def test_a_build_says_so_on_stderr_and_a_cached_load_says_nothing(monkeypatch, tmp_path, capfd) -> None:
    built = _built_sse_kernel()
    capfd.readouterr()
    monkeypatch.setenv("EMBREG_KERNEL_DIR", str(tmp_path))
    monkeypatch.setattr("torch.utils.cpp_extension.load", lambda **kwargs: kwargs)  # a build, without the compiler
    build = _kernel._KERNEL._build()
    err = capfd.readouterr().err
    assert f"embreg: compiling the fused SSE CPU kernel (once; about a minute) into {build['build_directory']}" in err
    assert "embreg: compiled the SSE kernel in" in err
    monkeypatch.setenv("EMBREG_KERNEL_DIR", str(Path(built.__file__).parent.parent))
    monkeypatch.setattr("torch.utils.cpp_extension.load", _no_compiler)
    assert _kernel._KERNEL._build().__file__ == built.__file__
    assert capfd.readouterr().err == ""


def test_the_backend_record_says_what_served_each_kernel(monkeypatch) -> None:
    kernel = _native.NativeKernel("demo", Path("demo.cpp"), "EMBREG_DEMO_KERNEL", "demo", record_key="demo")
    try:
        assert _native.backend_record()["demo_backend"] == "unused"
        monkeypatch.setenv("EMBREG_DEMO_KERNEL", "off")
        assert kernel.load() is None and _native.backend_record()["demo_backend"] == "torch"
        monkeypatch.setenv("EMBREG_DEMO_KERNEL", "auto")
        with pytest.warns(RuntimeWarning, match="could not build"):
            kernel.load()  # demo.cpp does not exist: the tensor ops serve
        assert _native.backend_record()["demo_backend"] == "torch"
    finally:
        _native._RECORDED.pop("demo")
    assert {"sse_backend", "sse_cuda_backend", "md_backend", "mf_step_backend"} <= set(_native.backend_record())


@pytest.mark.parametrize("mode", ["on", "off"])  # "off" after the kernel was loaded in this process
def test_a_run_records_the_sse_backend_it_drew_with(monkeypatch, tmp_path, mode: str) -> None:
    if mode == "on":
        _built_sse_kernel()
    monkeypatch.setenv("EMBREG_SSE_KERNEL", mode)
    overrides = ["data.max_rows=2000", "train.epochs=1", "train.progress=false", "index_transforms.item={name: sse-se}"]
    run_single(load_recipe("mf", overrides), tmp_path / "run")
    record = json.loads((tmp_path / "run" / "backends.json").read_text())
    assert record["sse_backend"] == {"off": "torch", "on": "cpp"}[mode]
    assert "sse_backend" not in json.loads((tmp_path / "run" / "metrics.json").read_text())


# -- a resume draws on the backends its run drew with ------------------------------------------------------------------

SSE_RUN = ["data.max_rows=2000", "train.epochs=2", "train.progress=false", "index_transforms.item={name: sse-se}"]


def _interrupted_after_epoch_0(recipe, out, monkeypatch) -> None:
    from embreg.train.trainer import Trainer

    step = Trainer._step_on_device

    def interrupted(self, batch, epoch):
        if epoch == 1:
            raise KeyboardInterrupt  # after epoch 0's last.safetensors, before any step of epoch 1
        return step(self, batch, epoch)

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_step_on_device", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_single(recipe, out)


@pytest.mark.parametrize("drew, resumed", [("auto", "off"), ("off", "auto")])
def test_a_resume_under_another_sse_backend_is_refused_before_any_update(monkeypatch, tmp_path, drew, resumed):
    from embreg.errors import EmbregError

    _built_sse_kernel()
    recipe = load_recipe("mf", SSE_RUN)
    monkeypatch.setenv("EMBREG_SSE_KERNEL", drew)
    whole = run_single(recipe, tmp_path / "whole")
    _interrupted_after_epoch_0(recipe, tmp_path / "split", monkeypatch)
    run = tmp_path / "split"
    expected = {"auto": "cpp", "off": "torch"}[drew]
    assert json.loads((run / "backends.json").read_text())["sse_backend"] == expected  # kept by the interrupted run
    kept = {name: (run / name).read_bytes() for name in ("last.safetensors", "history.jsonl", "backends.json")}
    monkeypatch.setenv("EMBREG_SSE_KERNEL", resumed)
    fix = {"off": "unset EMBREG_SSE_KERNEL", "auto": "set EMBREG_SSE_KERNEL=off"}[resumed]
    with pytest.raises(EmbregError, match=rf"drew with the '{expected}' backend .*: {fix}"):
        run_single(recipe, run, resume=True)
    assert {name: (run / name).read_bytes() for name in kept} == kept  # nothing trained, nothing rewritten
    monkeypatch.setenv("EMBREG_SSE_KERNEL", drew)
    resumed_run = run_single(recipe, run, resume=True)
    assert resumed_run.metrics["test_rmse"] == whole.metrics["test_rmse"]
    assert json.loads((run / "backends.json").read_text())["sse_backend"] == expected


def test_a_backend_expectation_names_a_failed_build_and_records_merge(monkeypatch) -> None:
    from embreg.errors import EmbregError

    kernel = _native.NativeKernel("demo", Path("demo.cpp"), "EMBREG_DEMO_KERNEL", "demo", record_key="demo")
    try:
        monkeypatch.setenv("EMBREG_DEMO_KERNEL", "auto")
        with _native.expected_backends({"demo_backend": "cpp", "sse_backend": "unused"}):
            with pytest.warns(RuntimeWarning, match="could not build"):
                with pytest.raises(
                    EmbregError, match=r"'cpp' backend .*\(the kernel could not be built: .*make it build"
                ):
                    kernel.load()  # demo.cpp does not exist
        assert kernel.load() is None  # outside a resume nothing is expected
        assert _native.merged_backend_record({"demo_backend": "cpp"})["demo_backend"] == "torch+cpp"
    finally:
        _native._RECORDED.pop("demo")

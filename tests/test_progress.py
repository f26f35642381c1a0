"""Progress off a terminal is plain lines: a run's stderr captured into a file holds no carriage return and no escape
code, one line per epoch and per tenth of an epoch's steps; on a terminal tqdm draws its bars."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from embreg.progress import LineProgress, is_terminal, progress

SRC = Path(__file__).resolve().parents[1] / "src"
CONTROL = re.compile(r"[\r\x1b\x08]")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_progress_is_a_line_per_share_and_on_one_a_tqdm_bar() -> None:
    stream = io.StringIO()
    assert not is_terminal(stream) and is_terminal(_Terminal())
    with progress(20, "epoch 0", unit="steps", every=0.25, file=stream) as bar:
        assert isinstance(bar, LineProgress)
        for _ in range(20):
            bar.update(1)
    lines = stream.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"epoch 0: {n}/20 steps" for n in (5, 10, 15, 20)]
    assert not CONTROL.search(stream.getvalue())
    epochs = io.StringIO()
    bar = progress(3, "epochs", unit="epochs", initial=1, file=epochs)  # a resumed run: one line per update
    bar.set_postfix({"loss": "0.5000"})
    bar.update(1)
    bar.close()
    assert re.fullmatch(r"epochs: 2/3 epochs \(67%, \d+\.\ds\) loss=0\.5000\n", epochs.getvalue())
    quiet = io.StringIO()
    with progress(3, "x", enabled=False, file=quiet) as bar:
        bar.update(3)
    assert quiet.getvalue() == ""
    terminal = _Terminal()
    with progress(2, "bar", file=terminal) as bar:
        bar.update(2)
    assert "\r" in terminal.getvalue()  # tqdm's own bar, redrawn in place


def test_a_runs_stderr_in_a_file_holds_plain_lines(tmp_path: Path) -> None:
    """``embreg run mf 2> log``: the log reads as text (no \\r, no ANSI codes), a line per epoch and per 10%."""
    log = tmp_path / "stderr.txt"
    args = ["run", "mf", "--set", "data.max_rows=2000", "--set", "train.epochs=2", "--out", str(tmp_path / "run")]
    with log.open("w") as err:
        code = subprocess.run(
            [sys.executable, "-m", "embreg.cli", *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"},
            timeout=600,
        ).returncode
    text = log.read_text()
    assert code == 0, text
    assert not CONTROL.search(text), repr(text[:300])
    lines = text.splitlines()
    assert [line.split(" (")[0] for line in lines if line.startswith("epochs:")] == [
        "epochs: 1/2 epochs",
        "epochs: 2/2 epochs",
    ]
    assert all("loss=" in line and "val_rmse=" in line for line in lines if line.startswith("epochs:"))
    steps = [line.split(" (")[0] for line in lines if line.startswith("epoch 0:")]
    assert steps == [f"epoch 0: {n}/4 steps" for n in (1, 2, 3, 4)]  # 1,600 training rows in steps of 512

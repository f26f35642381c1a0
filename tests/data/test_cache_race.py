"""Two processes fetching one dataset into a fresh cache at once: both succeed, the files verify, one download."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.helpers.data_helpers import TOY_FILES, leftovers, make_zip, sha

# Each process registers the toy dataset with one source: a zip archive read from a file:// address (no network),
# slowed down so that both processes are inside fetch() at the same time.
WORKER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from embreg.data.registry import DatasetFile, DatasetPart, DatasetRegistry, DatasetSpec
    from embreg.data.sources import UrlArchiveSource

    archive, archive_sha, files, go, calls = sys.argv[1:6]
    files = json.loads(files)

    class SlowArchive(UrlArchiveSource):
        def provide(self, names, dest, *, scratch, progress):
            with open(calls, "a") as log:
                log.write("provide\\n")
            time.sleep(1.0)
            super().provide(names, dest, scratch=scratch, progress=progress)

    source = SlowArchive(Path(archive).as_uri(), archive_sha, members={n: "toy/" + n for n in files})
    spec = DatasetSpec("toy", "a toy dataset", (DatasetPart("all", tuple(DatasetFile(n, d) for n, d in files.items()),
                                                              (source,)),))
    registry = DatasetRegistry()
    registry.register(spec)
    print("ready", flush=True)
    while not Path(go).exists():
        time.sleep(0.01)
    directory = registry.fetch("toy", progress=False)
    print(json.dumps({"dir": str(directory), "cached": registry.is_cached("toy")}), flush=True)
""")


def test_two_processes_fetching_one_dataset_both_succeed(home: Path, tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "toy.zip", {f"toy/{name}": data for name, data in TOY_FILES.items()})
    files = {name: sha(data) for name, data in TOY_FILES.items()}
    go, calls = tmp_path / "go", tmp_path / "calls.txt"
    args = [str(archive), sha(archive.read_bytes()), json.dumps(files), str(go), str(calls)]
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, EMBREG_HOME=str(home), PYTHONPATH=os.pathsep.join([str(repo / "src"), str(repo)]))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        started = time.perf_counter()
        go.touch()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    target = home / "datasets" / "toy"
    assert results == [{"dir": str(target), "cached": True}] * 2
    assert {p.name: p.read_bytes() for p in target.glob("*.txt")} == TOY_FILES
    assert json.loads((target / ".manifest.json").read_text())["files"] == files
    assert calls.read_text().splitlines() == ["provide"]  # the second process waited and used the first's copy
    assert time.perf_counter() - started >= 1.0
    assert leftovers(home) == ["toy"]  # no staging directory, no lock file

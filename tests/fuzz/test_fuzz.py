"""Short coverage-guided runs of every fuzz target, and the replay of saved crashes.

Each target (fuzz_targets.py) runs under atheris in a child process for a fixed number of
inputs with a fixed seed, so a run is repeatable, from the recorded corpus plus generated
seeds (seeds.py). A crash fails the test and its input is saved in ``crashes/<target>/``,
where ``test_saved_crashes_stay_fixed`` replays it from then on. Inputs in ``open/``
reproduce defects found outside this test's reach that are not fixed yet (see
open/README.md); their test turns into a failure once they pass, so that they move to
``crashes/``. Longer runs: ``python tests/fuzz/run_fuzz.py --help``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")

HERE = Path(__file__).parent
RUNS = {  # inputs per target: a few seconds each on the project's VM
    "frames": 10000,
    "request": 15000,
    "response": 10000,
    "batch": 20000,
    "compressed": 20000,
    "index": 4000,
    "checkpoint": 4000,
}
# Targets with a known defect outside the protocol layer (see open/README.md): expected to fail.
OPEN: dict[str, str] = {}


def run_child(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    env_path = f"{HERE.parent.parent}"
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(t, marks=pytest.mark.xfail(strict=True, reason=OPEN[t])) if t in OPEN else t
        for t in RUNS
    ],
)
def test_fuzz_target_survives_a_short_run(target, tmp_path):
    seeds, found, artifacts = tmp_path / "seeds", tmp_path / "found", tmp_path / "artifacts"
    found.mkdir()
    artifacts.mkdir()
    child = run_child(
        ["-c", f"import sys; sys.path.insert(0, {str(HERE)!r}); import seeds, pathlib; "
               f"seeds.write_seeds({target!r}, pathlib.Path({str(seeds)!r}))"]
    )
    assert child.returncode == 0, child.stderr[-3000:]
    child = run_child(
        [
            str(HERE / "run_fuzz.py"),
            target,
            f"-runs={RUNS[target]}",
            "-seed=1",
            "-max_len=4096",
            "-len_control=0",
            "-rss_limit_mb=1024",
            "-timeout=20",
            f"-artifact_prefix={artifacts}/",
            str(found),
            str(seeds),
        ]
    )
    crashes = sorted(artifacts.iterdir())
    if target not in OPEN:
        for crash in crashes:
            saved = HERE / "crashes" / target / crash.name
            saved.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(crash, saved)
    assert child.returncode == 0 and not crashes, (
        f"the {target} target crashed; input saved as crashes/{target}/{crashes[0].name if crashes else '?'}\n"
        + child.stderr[-4000:]
    )


def test_saved_crashes_stay_fixed():
    child = run_child([str(HERE / "run_fuzz.py"), "--replay", str(HERE / "crashes")])
    assert child.returncode == 0, child.stdout[-4000:] + child.stderr[-2000:]
    assert " 0 failed" in child.stdout

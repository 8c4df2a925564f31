"""Coverage-guided fuzzing of one target with atheris, or the replay of saved inputs.

    python tests/fuzz/run_fuzz.py TARGET [libFuzzer options] [CORPUS_DIR ...]
    python tests/fuzz/run_fuzz.py --replay PATH ...

TARGET is a name from fuzz_targets.TARGETS (frames, request, response, batch, compressed,
index, checkpoint). The options are libFuzzer's: ``-runs=N``, ``-max_total_time=S``,
``-seed=N``, ``-max_len=N``, ``-rss_limit_mb=N``, ``-artifact_prefix=DIR/`` (where a
crashing input is written). The first corpus directory receives the new inputs found;
``seeds.py`` writes a starting corpus:

    python -c "import sys; sys.path[:0]=['tests/fuzz']; import seeds, pathlib; \\
               seeds.write_seeds('request', pathlib.Path('/tmp/seed-request'))"
    python tests/fuzz/run_fuzz.py request -max_total_time=600 /tmp/new /tmp/seed-request

``--replay`` runs saved inputs (files, or directories of files) through the target named
by each file's directory (``crashes/<target>/<file>``) and exits 1 if any still fails.

Odradek's modules are instrumented for coverage, and so are the checks ``wellformed``
generates at run time.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def replay(paths: list[str]) -> int:
    import fuzz_targets

    files = []
    for p in map(Path, paths):
        files += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
    failed = 0
    for f in files:
        print(f"replaying {f}", flush=True)  # an abort leaves this as the last line
        try:
            fuzz_targets.TARGETS[f.parent.name](f.read_bytes())
        except Exception:
            failed += 1
            print(f"FAILED {f}\n{traceback.format_exc()}", flush=True)
    print(f"{len(files)} inputs replayed, {failed} failed")
    return 1 if failed else 0


def fuzz(target: str, argv: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=["odradek"]):
        import fuzz_targets

        from odradek.protocol import wellformed

    compile_check = wellformed._compile
    wellformed._compile = lambda steps, name: atheris.instrument_func(compile_check(steps, name))
    atheris.Setup([sys.argv[0], *argv], fuzz_targets.TARGETS[target])
    atheris.Fuzz()


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if sys.argv[1] == "--replay":
        sys.exit(replay(sys.argv[2:]))
    fuzz(sys.argv[1], sys.argv[2:])

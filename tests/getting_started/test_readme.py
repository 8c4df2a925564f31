"""The README's examples, run in order as a newcomer would, against a broker started with
the development config the README ships (config/server.properties)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from odradek.testing.process import free_port, wait_for_port

REPO = Path(__file__).resolve().parents[2]
README_ADDRESS = "127.0.0.1:9092"

pytestmark = pytest.mark.timeout(300)


def readme_blocks() -> list[tuple[str, str]]:
    """(language, code) of each fenced block of the README, in order."""
    text = (REPO / "README.md").read_text()
    return re.findall(r"^```(\w+)\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def dev_broker(tmp_path_factory):
    """``odradek server config/server.properties`` in a fresh directory (data in its
    ./odradek-data, as with `make broker`), on a free port instead of 9092."""
    workdir = tmp_path_factory.mktemp("readme")
    port = free_port()
    with open(workdir / "broker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "server", str(REPO / "config" / "server.properties"),
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", "http.listeners=http://127.0.0.1:0",
             "--override", "schema.registry.listeners=http://127.0.0.1:0"],
            cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_for_port("127.0.0.1", port, 30, proc)
        yield workdir, f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def _run(workdir: Path, address: str, lang: str, code: str) -> str:
    code = code.replace(README_ADDRESS, address)
    env = {**os.environ, "ODRADEK_BOOTSTRAP_SERVER": address, "PYTHONUNBUFFERED": "1"}
    if lang == "python" and "def test_" in code:  # a test for the reader's own suite
        (workdir / "test_from_readme.py").write_text(code)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_from_readme.py"]
    elif lang == "python":
        cmd = [sys.executable, "-c", code]
    else:  # the shell commands, with `odradek` as installed (this interpreter's)
        prelude = f'odradek() {{ {shlex.quote(sys.executable)} -m odradek "$@"; }}\nset -e\n'
        cmd = ["bash", "-c", prelude + code]
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"this README example did not finish in 120 s:\n{code}\n{exc.stdout}") from None
    assert proc.returncode == 0, f"this README example failed:\n{code}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc.stdout


def test_readme_examples_run_in_order_and_print_their_records(dev_broker):
    workdir, address = dev_broker
    # ``sh`` blocks need a cluster of their own (tests/cluster/test_cluster_cli.py runs their commands).
    blocks = [(lang, code) for lang, code in readme_blocks() if lang in ("python", "bash")]
    # Not `make broker`/`make test`, nor `make dist` (tests/test_wheel_install.py follows that one).
    runnable = [(lang, code) for lang, code in blocks if "make " not in code]
    assert len(runnable) == len(blocks) - 2, "only the two `make` blocks are not run"

    kcat = confluent = kip848 = share = blocking = rerun = asyncio_example = cli = tested = None
    for lang, code in runnable:
        out = _run(workdir, address, lang, code)
        if "kcat -b" in code:
            kcat = out
        elif "ShareConsumer" in code:
            share = out
        elif '"group.protocol": "consumer"' in code:
            kip848 = out
        elif "confluent_kafka" in code and "def test_" in code:
            tested = out
        elif "confluent_kafka" in code:
            confluent = out
        elif "from odradek import" in code:
            blocking = out
            rerun = _run(workdir, address, lang, code)  # again, as a reader would
        elif "from odradek.aio import" in code:
            asyncio_example = out
        elif "odradek topics create" in code:
            cli = out

    assert kcat.splitlines()[0] == "hello"
    assert confluent.splitlines() == ["0 None b'hello'"]  # kcat's record came first
    assert kip848 == ""  # it only subscribes
    # The share group reads from the start: the first poll that brings records brings one or both
    # greetings (one fetch), each delivered for the first time.
    assert share.splitlines() in (["b'hello' delivery 1"], ["b'hello' delivery 1"] * 2), share
    assert blocking.splitlines() == ["payments 0 0", "0 b'order-7' b'paid 42'"]
    # The rerun's group goes on after the offset it committed: it prints the new record.
    assert rerun.splitlines() == ["payments 0 1", "1 b'order-7' b'paid 42'"]
    assert asyncio_example.splitlines()[:2] == ["payments 0 2", "0 b'order-7' b'paid 42'"]
    assert {str(i) for i in range(1, 11)} <= set(cli.splitlines())  # consume printed the ten lines
    assert re.search(r"^billing\s+payments\s+0\s+2\s+4\s+2\b", cli, re.MULTILINE), cli  # groups describe
    assert "1 passed" in tested

"""The wheel users install (issue 25): what ``make dist`` builds, installed alone.

``python -m build`` makes the sdist and, from it, the wheel (a file the sdist lacks fails
here). The wheel carries complete metadata, the console's static files and ``py.typed``.
Installed into a fresh virtual environment that sees no system site packages (so only the
runtime dependencies it declares, from pip's cache or the index), its ``odradek`` script
prints its version and runs a broker that a client (that venv's own ``odradek produce`` and
``odradek consume``) writes a record to and reads it back from, and that serves the console's
files byte for byte.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tomllib
import urllib.request
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from odradek.testing.process import BrokerProcess

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME, VERSION = PROJECT["name"], PROJECT["version"]
STATIC = ROOT / "odradek" / "http" / "static"

pytestmark = pytest.mark.timeout(600)


def _run(cmd: list, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


# What would let a child process see the test venv's packages.
LEAKS = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in LEAKS}


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> tuple[Path, Path]:
    """(wheel, sdist), built as ``make dist`` builds them."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], timeout=300)
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


@pytest.fixture(scope="module")
def venv_bin(dist, tmp_path_factory) -> Path:
    """The bin/ of a fresh venv (no system site packages) with the wheel and its runtime dependencies."""
    venv = tmp_path_factory.mktemp("venv")
    env = _clean_env()
    _run([sys.executable, "-m", "venv", str(venv)], timeout=120, env=env)
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    _run([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", str(dist[0])], 300, env=env)
    return venv / "bin"


def _static_files() -> set[str]:
    return {p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.is_file()}


def test_wheel_carries_the_console_py_typed_and_complete_metadata(dist):
    wheel, _ = dist
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"{NAME}-{VERSION}.dist-info"
        metadata = Parser().parsestr(z.read(f"{info}/METADATA").decode())
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert {f"odradek/http/static/{n}" for n in _static_files()} <= names
    assert {"odradek/py.typed", "pyspark_odradek/__init__.py"} <= names
    assert {f"{info}/licenses/LICENSE", f"{info}/licenses/NOTICE"} <= names
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]

    assert metadata["License-Expression"] == "Apache-2.0"
    assert {"LICENSE", "NOTICE"} <= set(metadata.get_all("License-File"))
    classifiers = metadata.get_all("Classifier")
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3 :: Only" in classifiers
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert metadata.get_payload().strip() == (ROOT / "README.md").read_text().strip()
    assert any(r.startswith("cryptography") for r in metadata.get_all("Requires-Dist"))
    assert "spark" in metadata.get_all("Provides-Extra")
    # No invented home: a Project-URL must be an address that exists (none yet, see pyproject.toml).
    assert metadata.get_all("Project-URL") is None
    assert "odradek = odradek.cli.main:main" in entry_points


def test_sdist_carries_docs_config_and_licenses(dist):
    _, sdist = dist
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    docs = {f"docs/{p.name}" for p in (ROOT / "docs").iterdir()}
    assert {"LICENSE", "NOTICE", "README.md", "pyproject.toml", "config/server.properties"} <= names
    assert docs <= names
    assert {"odradek/py.typed", "odradek/http/static/index.html"} <= names


def test_installed_wheel_runs_a_broker_a_client_uses(dist, venv_bin, tmp_path, monkeypatch):
    for name in LEAKS:  # the broker process inherits this environment
        monkeypatch.delenv(name, raising=False)
    env = _clean_env()
    odradek = str(venv_bin / "odradek")
    # Only the runtime dependencies came along: nothing of the test extra.
    probe = "import importlib.util as u; print([m for m in ('pytest', 'confluent_kafka', 'pyspark') if u.find_spec(m)])"
    assert _run([venv_bin / "python", "-c", probe], 60, env=env).stdout.strip() == "[]"

    assert _run([odradek, "--version"], 60, env=env).stdout.strip() == f"odradek, version {VERSION}"

    broker = BrokerProcess(tmp_path / "data", program=[odradek], log_path=tmp_path / "broker.log")
    broker.start(timeout=60)
    try:
        bootstrap = ["--bootstrap-server", broker.bootstrap_servers]
        line = "hello from the wheel"
        _run([odradek, "produce", "installed", *bootstrap], 60, env=env, input=line + "\n")
        consumed = _run(
            [odradek, "consume", "installed", *bootstrap, "--from-beginning", "-n", "1", "--timeout-ms", "30000"],
            60,
            env=env,
        )
        assert consumed.stdout.splitlines() == [line]

        with zipfile.ZipFile(dist[0]) as z:
            for name in sorted(_static_files()):
                with urllib.request.urlopen(f"{broker.http_url}/static/{name}", timeout=10) as answer:
                    assert answer.read() == z.read(f"odradek/http/static/{name}"), name
            with urllib.request.urlopen(f"{broker.http_url}/", timeout=10) as answer:
                assert answer.read() == z.read("odradek/http/static/index.html")
    finally:
        code = broker.stop()
    log = broker.log_text()
    assert code == 0, f"the broker exited {code}:\n{log[-4000:]}"
    assert "Traceback" not in log, log[-4000:]

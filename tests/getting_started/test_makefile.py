"""The Makefile behind the README's two commands: what `make test` checks and installs
before the long pip install."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")

pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed (CI installs it first)")


def test_missing_java_is_reported_in_one_line_before_installing(tmp_path):
    tools = tmp_path / "bin"  # what the check needs, and no java
    tools.mkdir()
    for tool in ("sed", "head"):
        (tools / tool).symlink_to(shutil.which(tool))
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | {"PATH": str(tools)}
    r = subprocess.run([MAKE, "-s", "check-java"], cwd=REPO, env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stderr.splitlines()[0] == (
        "error: the Spark tests need Java 17 or newer (no java on PATH or in JAVA_HOME): "
        "apt-get install openjdk-17-jre-headless, or point JAVA_HOME at one"
    )


def test_an_old_java_is_named(tmp_path):
    java_home = tmp_path / "jdk8"
    (java_home / "bin").mkdir(parents=True)
    java = java_home / "bin" / "java"
    java.write_text('#!/bin/sh\necho \'java version "1.8.0_392"\' >&2\n')
    java.chmod(0o755)
    r = subprocess.run(
        [MAKE, "-s", "check-java"], cwd=REPO, env={**os.environ, "JAVA_HOME": str(java_home)},
        capture_output=True, text=True,
    )  # fmt: skip
    assert r.returncode != 0 and "(found Java 8)" in r.stderr.splitlines()[0]


def test_make_test_installs_debian_packages_and_checks_java_before_pip(tmp_path):
    r = subprocess.run(
        [MAKE, "-n", "test", f"VENV={tmp_path / 'venv'}"], cwd=REPO, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    plan = r.stdout
    apt, java, venv, pip, pytest_ = (
        plan.index(".ci/apt-install kcat"),
        plan.index("the Spark tests need Java 17"),
        plan.index(f"-m venv {tmp_path / 'venv'}"),  # no --system-site-packages: only what pyproject declares
        plan.index("pip --disable-pip-version-check install -e '.[test]'"),
        plan.index("-m pytest"),
    )
    assert apt < java < venv < pip < pytest_
    assert "--system-site-packages" not in plan.splitlines()[plan.count("\n", 0, venv)]
    assert f"{tmp_path / 'venv'}/bin/python -m pytest" in plan  # the tests run from the venv


def test_make_test_runs_ruff_and_mypy_from_the_venv_before_the_tests(tmp_path):
    python = f"{tmp_path / 'venv'}/bin/python"
    r = subprocess.run([MAKE, "-n", "test", f"VENV={tmp_path / 'venv'}"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    plan = r.stdout
    tests = plan.index(f"{python} -m pytest")
    assert plan.index(f"{python} -m ruff check odradek tests benchmarks") < tests
    assert plan.index(f"{python} -m mypy\n") < tests  # its files come from pyproject's [tool.mypy]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian system")
def test_apt_install_does_nothing_when_the_packages_are_there():
    installed = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\n", "coreutils", "bash"], capture_output=True, text=True
    ).stdout.split()
    r = subprocess.run([str(REPO / ".ci" / "apt-install"), *installed], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")

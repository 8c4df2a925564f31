"""Helpers of the registry tests: a registry process and waiting for it to be ready.

A module of its own (not conftest): several test directories have a conftest.py, and
``from conftest import`` would take whichever was loaded last."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import requests

from odradek.testing.process import free_port, wait_for_port

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def wait_until_ready(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Until the registry has read its topic (it answers 50001 before)."""
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the registry exited with code {proc.returncode}")
        try:
            if requests.get(f"{url}/subjects", timeout=5).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the registry at {url} not ready after {timeout}s")
        time.sleep(0.05)


class RegistryProcess:
    """``python -m odradek schema-registry`` on a free port; stop() sends SIGTERM, kill() SIGKILL."""

    def __init__(self, bootstrap: str, log_path, topic: str, **overrides: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.settings = {
            "listeners": self.url,
            "kafkastore.bootstrap.servers": bootstrap,
            "kafkastore.topic": topic,
            "schema.registry.group.id": f"registry-{topic}",
            "host.name": "127.0.0.1",
            **overrides,
        }
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> RegistryProcess:
        cmd = [sys.executable, "-m", "odradek", "schema-registry"]
        for key, value in self.settings.items():
            cmd += ["--override", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        wait_for_port("127.0.0.1", self.port, timeout, self.proc)
        wait_until_ready(self.url, timeout, self.proc)
        return self

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_text(self) -> str:
        return open(self.log_path, errors="replace").read() if os.path.exists(self.log_path) else ""

    # -- HTTP --------------------------------------------------------------------------------

    def request(self, method: str, path: str, body=None, **kwargs) -> requests.Response:
        headers = kwargs.pop("headers", {"Content-Type": CONTENT_TYPE})
        return requests.request(method, self.url + path, json=body, headers=headers, timeout=30, **kwargs)

    def ok(self, method: str, path: str, body=None):
        resp = self.request(method, path, body)
        assert resp.status_code == 200, f"{method} {path}: {resp.status_code} {resp.text}"
        return resp.json()

    def error(self, method: str, path: str, body=None, **kwargs) -> tuple[int, int]:
        """(HTTP status, error_code) of a request that must fail."""
        resp = self.request(method, path, body, **kwargs)
        assert resp.status_code >= 400, f"{method} {path} succeeded: {resp.text}"
        return resp.status_code, resp.json()["error_code"]

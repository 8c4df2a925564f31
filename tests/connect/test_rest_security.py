"""The REST listener with TLS (listeners=https://…) and HTTP basic authentication
(rest.basic.auth.users): a client with the CA and the right credentials is served, one without
credentials or with a wrong password gets Kafka's 401 error, and the worker keeps serving."""

from __future__ import annotations

import requests
from connect_support import WorkerProcess, quickstart_worker

from odradek.testing.process import free_port
from tests.security import certs


def test_https_with_basic_auth(broker, tmp_path):
    ca = certs.TestCA()
    server = ca.issue("localhost", server=True)
    keystore = tmp_path / "rest.pem"
    keystore.write_bytes(server.cert_pem() + server.key_pem())
    (tmp_path / "ca.pem").write_bytes(ca.pem())
    config = quickstart_worker(broker.bootstrap_servers, tmp_path, **{
        "listeners": f"https://127.0.0.1:{free_port()}",
        "listeners.https.ssl.keystore.location": str(keystore),
        "rest.basic.auth.users": "alice:secret",
    })
    worker = WorkerProcess(tmp_path, config).start()
    try:
        url, ca_file = worker.url, str(tmp_path / "ca.pem")
        assert url.startswith("https://")
        served = requests.get(url + "/connectors", verify=ca_file, auth=("alice", "secret"), timeout=30)
        assert (served.status_code, served.json()) == (200, [])
        for auth in (None, ("alice", "wrong"), ("mallory", "secret")):
            refused = requests.get(url + "/connectors", verify=ca_file, auth=auth, timeout=30)
            assert refused.status_code == 401 and refused.json()["error_code"] == 401
        assert requests.get(url + "/", verify=ca_file, auth=("alice", "secret"), timeout=30).status_code == 200
    finally:
        worker.kill()
    assert "Traceback" not in worker.log_text()

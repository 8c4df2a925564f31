"""The console's Connectors page in Debian's chromium (Playwright): a broker whose
console.connect.urls names a real ``odradek connect standalone`` worker running Kafka's
FileStreamSource and a connector whose task raises; the page shows both with their tasks,
the failed task's trace and the config, and pauses and resumes a connector on the worker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from http_helpers import get_json, request, wait_until
from test_console_browser import Page, browser  # noqa: F401  (browser: the module's chromium)
from test_remote_console import start_console, stop

from odradek.testing.process import BrokerProcess, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "connect"))
from connect_support import WorkerProcess, quickstart_worker  # noqa: E402
from test_rest_api import FAILING_PLUGIN  # noqa: E402


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    """(broker, worker): the worker runs 'file-source' (RUNNING) and 'boom' (its task FAILED)."""
    directory = tmp_path_factory.mktemp("connectors-page")
    plugins = directory / "plugins"
    plugins.mkdir()
    (plugins / "exploding.py").write_text(FAILING_PLUGIN)
    (directory / "in.txt").write_text("one\ntwo\nthree\n")
    worker_url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(directory / "data", overrides={"console.connect.urls": worker_url}).start()
    source = {"name": "file-source", "connector.class": "FileStreamSource", "tasks.max": "1",
              "file": str(directory / "in.txt"), "topic": "connect-page-lines"}  # fmt: skip
    boom = {"name": "boom", "connector.class": "ExplodingSource", "topic": "connect-page-boom"}
    config = quickstart_worker(
        broker.bootstrap_servers, directory, listeners=worker_url, **{"plugin.path": str(plugins)}
    )
    worker = WorkerProcess(directory, config, [source, boom])
    try:
        worker.start()
        wait_until(
            lambda: task_states(worker, "file-source") == ["RUNNING"], 60, message="file-source's task to run"
        )
        wait_until(lambda: task_states(worker, "boom") == ["FAILED"], 60, message="boom's task to fail")
        yield broker, worker
    finally:
        worker.kill()
        broker.stop()
    assert "Traceback" not in broker.log_text()


def task_states(worker, name: str):
    resp = worker.get(f"/connectors/{name}/status")
    return [t["state"] for t in resp.json()["tasks"]] if resp.status_code == 200 else None


def test_the_page_shows_connectors_their_tasks_a_failed_trace_and_the_config(browser, connect):  # noqa: F811
    broker, worker = connect
    page = Page(browser, broker.http_url)
    page.open("#/connectors")
    assert f"Connect cluster {worker.url}" in page.tab.locator("main").inner_text()
    rows = {r.get_by_test_id("connector-link").inner_text(): r for r in page.by("connector-row").all()}
    assert sorted(rows) == ["boom", "file-source"]
    worker_id = worker.get("/connectors/file-source/status").json()["connector"]["worker_id"]
    cells = rows["file-source"].locator("td").all_inner_texts()
    assert cells[:4] == ["file-source", "source", "RUNNING", worker_id]
    assert rows["file-source"].get_by_test_id("task-chip").all_inner_texts() == ["0: RUNNING"]
    assert rows["boom"].get_by_test_id("task-chip").all_inner_texts() == ["0: FAILED"]
    page.shot("connectors")

    rows["boom"].get_by_test_id("connector-link").click()
    page.tab.wait_for_selector('[data-loaded="#/connectors/0/boom"]')
    assert page.by("connector-state").inner_text().startswith("RUNNING")
    task = page.by("task-row")
    assert task.count() == 1 and "FAILED" in task.inner_text()
    trace = page.by("task-trace").inner_text()
    assert "RuntimeError" in trace and "the source is on fire" in trace
    config = dict(r.locator("td").all_inner_texts() for r in page.by("config-row").all())
    assert config["connector.class"] == "ExplodingSource" and config["topic"] == "connect-page-boom"
    page.shot("connector-failed")
    page.close()


def test_pause_and_resume_from_the_page_reach_the_worker(browser, connect):  # noqa: F811
    broker, worker = connect
    page = Page(browser, broker.http_url)
    page.open("#/connectors/0/file-source")
    page.by("connector-pause").click()
    page.by("confirm-ok").click()
    wait_until(lambda: worker.get("/connectors/file-source/status").json()["connector"]["state"] == "PAUSED",
               30, message="the worker to pause file-source")  # fmt: skip
    page.by("connector-resume").wait_for()  # the page follows the worker's state
    assert page.by("connector-state").inner_text().startswith("PAUSED")
    page.by("connector-resume").click()
    page.by("confirm-ok").click()
    wait_until(lambda: task_states(worker, "file-source") == ["RUNNING"]
               and worker.get("/connectors/file-source/status").json()["connector"]["state"] == "RUNNING",
               30, message="the worker to resume file-source")  # fmt: skip
    page.by("connector-pause").wait_for()
    page.close()


def test_the_action_route_passes_the_workers_answer_and_refuses_foreign_pages(connect):
    broker, worker = connect
    base = broker.http_url
    status, _, body = request(base, "POST", "/v1/connect/0/connectors/nobody/pause", {})
    assert status == 404 and b"nobody" in body
    status, _, _ = request(base, "POST", "/v1/connect/0/connectors/boom/restart", {})
    assert status == 200
    status, _, _ = request(base, "POST", "/v1/connect/0/connectors/boom/restart", {},
                           headers={"Origin": "http://evil.example"})  # fmt: skip
    assert status == 403
    status, _, body = request(base, "POST", "/v1/connect/1/connectors/boom/pause", {})
    assert status == 404 and b"1 configured" in body
    wait_until(
        lambda: task_states(worker, "boom") == ["FAILED"], 30, message="boom's restarted task to fail again"
    )


def test_without_a_connect_url_the_page_says_how_to_set_one(browser, http_broker):  # noqa: F811
    page = Page(browser, http_broker.http_url)
    page.open("#/connectors")
    text = page.by("connect-not-configured").inner_text()
    assert "console.connect.urls=http://127.0.0.1:8083" in text and "--connect-url" in text
    page.close()


def test_odradek_console_reads_the_workers_named_by_connect_url(connect, tmp_path):
    broker, worker = connect
    nobody = f"http://127.0.0.1:{free_port()}"  # no worker listens there
    proc, url = start_console(
        broker.bootstrap_servers, tmp_path / "console.log", "--connect-url", f"{worker.url},{nobody}"
    )
    try:
        remote, local = get_json(url, "/v1/connect"), get_json(broker.http_url, "/v1/connect")
    finally:
        assert stop(proc) == 0
    assert [c["url"] for c in remote["clusters"]] == [worker.url, nobody]
    assert "does not answer" in remote["clusters"][1]["error"] and remote["clusters"][1]["connectors"] == []
    assert connector_types(remote) == connector_types(local) == {"boom": "source", "file-source": "source"}


def connector_types(overview: dict) -> dict[str, str]:
    return {c["name"]: c["type"] for c in overview["clusters"][0]["connectors"]}

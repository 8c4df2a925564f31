"""Kafka Connect's REST API on one standalone worker process: create, read, change, pause, stop,
offsets, restart and delete connectors with Kafka's request and response shapes; bad input
(invalid JSON, unknown class, failing validation, a task raising in poll, a poison record)
answered clearly while the worker keeps serving the others."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from connect_support import WorkerProcess, quickstart_worker
from support import wait_until

from odradek import Consumer, Producer, TopicPartition

FAILING_PLUGIN = textwrap.dedent(
    """
    from odradek.connect.api import SinkConnector, SinkTask, SourceConnector, SourceTask

    class ExplodingTask(SourceTask):
        def poll(self):
            raise RuntimeError("the source is on fire")

    class ExplodingSinkTask(SinkTask):
        def put(self, records):
            if records:
                raise ValueError("the sink is full")

    class ExplodingSinkConnector(SinkConnector):
        def start(self, props):
            self.props = props

        def task_class(self):
            return ExplodingSinkTask

        def task_configs(self, max_tasks):
            return [dict(self.props)]

    class ExplodingSourceConnector(SourceConnector):
        def start(self, props):
            self.props = props

        def task_class(self):
            return ExplodingTask

        def task_configs(self, max_tasks):
            return [dict(self.props)]
    """
)


def docs_example() -> str:
    """The connector of docs/connect.md's "Writing a connector in Python", verbatim."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "connect.md").read_text()
    section = text[text.index("## Writing a connector in Python"):]
    return section[section.index("```python") + len("```python"):section.index("```", section.index("```python") + 9)]


@pytest.fixture(scope="module")
def worker(broker, tmp_path_factory):
    directory = tmp_path_factory.mktemp("connect-rest")
    plugins = directory / "plugins"
    plugins.mkdir()
    (plugins / "exploding.py").write_text(FAILING_PLUGIN)
    (plugins / "counter.py").write_text(docs_example())
    config = quickstart_worker(broker.bootstrap_servers, directory, **{"plugin.path": str(plugins)})
    proc = WorkerProcess(directory, config).start()
    yield proc
    proc.kill()


def file_source(path, topic: str) -> dict[str, str]:
    return {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(path), "topic": topic}


def state_of(worker, name: str):
    status = worker.get(f"/connectors/{name}/status").json()
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def test_root_and_plugins(worker, broker):
    root = worker.get("/").json()
    assert set(root) == {"version", "commit", "kafka_cluster_id"} and root["kafka_cluster_id"]
    plugins = {p["class"]: p["type"] for p in worker.get("/connector-plugins").json()}
    assert plugins["org.apache.kafka.connect.file.FileStreamSourceConnector"] == "source"
    assert plugins["org.apache.kafka.connect.file.FileStreamSinkConnector"] == "sink"
    assert plugins["exploding.ExplodingSourceConnector"] == "source"
    everything = {(p["class"], p["type"]) for p in worker.get("/connector-plugins?connectorsOnly=false").json()}
    assert ("org.apache.kafka.connect.json.JsonConverter", "converter") in everything
    assert ("org.apache.kafka.connect.transforms.InsertField$Value", "transformation") in everything
    keys = {k["name"] for k in worker.get("/connector-plugins/FileStreamSource/config").json()}
    assert keys == {"file", "topic", "batch.size"}


def test_a_connector_through_its_life(worker, tmp_path, topic_name):
    source_file = tmp_path / "in.txt"
    source_file.write_text("a\nb\nc\n")
    created = worker.request("POST", "/connectors", json={"name": "life", "config": file_source(source_file, topic_name)})
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "life" and created.json()["type"] == "source"
    assert created.json()["config"]["file"] == str(source_file)
    assert worker.request("POST", "/connectors", json={"name": "life", "config": file_source(source_file, "x")}
                          ).json() == {"error_code": 409, "message": "Connector life already exists"}
    wait_until(lambda: state_of(worker, "life") == ("RUNNING", ["RUNNING"]), 30, "life to run")
    assert "life" in worker.get("/connectors").json()
    expanded = worker.get("/connectors?expand=status&expand=info").json()["life"]
    assert expanded["status"]["connector"]["state"] == "RUNNING" and expanded["info"]["name"] == "life"
    tasks = worker.get("/connectors/life/tasks").json()
    assert tasks[0]["id"] == {"connector": "life", "task": 0} and tasks[0]["config"]["topic"] == topic_name
    assert worker.get("/connectors/life/tasks/0/status").json()["state"] == "RUNNING"
    wait_until(lambda: worker.get("/connectors/life/topics").json() == {"life": {"topics": [topic_name]}}, 30,
               "the topic to be listed as active")

    assert worker.request("PUT", "/connectors/life/pause").status_code == 202
    assert state_of(worker, "life") == ("PAUSED", ["PAUSED"])
    assert worker.request("PUT", "/connectors/life/resume").status_code == 202
    assert state_of(worker, "life") == ("RUNNING", ["RUNNING"])

    # Offsets can be changed only when the connector is STOPPED (KIP-875).
    assert worker.request("DELETE", "/connectors/life/offsets").status_code == 400
    assert worker.request("PUT", "/connectors/life/stop").status_code == 204
    assert state_of(worker, "life") == ("STOPPED", [])
    partition = {"filename": str(source_file)}
    wait_until(lambda: worker.get("/connectors/life/offsets").json()["offsets"], 10, "stored offsets")
    assert worker.get("/connectors/life/offsets").json() == {"offsets": [{"partition": partition,
                                                                           "offset": {"position": 6}}]}
    patched = worker.request("PATCH", "/connectors/life/offsets",
                             json={"offsets": [{"partition": partition, "offset": {"position": 2}}]})
    assert patched.status_code == 200 and "altered successfully" in patched.json()["message"]
    # Resumed from position 2: "b" and "c" are read again.
    assert worker.request("PUT", "/connectors/life/resume").status_code == 202
    with Consumer(bootstrap_servers=worker.worker["bootstrap.servers"], auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic_name, 0)])
        values: list = []
        wait_until(lambda: len(values) >= 5, 30, "5 records",
                   step=lambda: values.extend(json.loads(r.value)["payload"] for r in consumer.poll(0.5)))
    assert values == ["a", "b", "c", "b", "c"]

    changed = dict(file_source(source_file, topic_name), **{"batch.size": "10"})
    replaced = worker.request("PUT", "/connectors/life/config", json=changed)
    assert replaced.status_code == 200 and worker.get("/connectors/life/config").json()["batch.size"] == "10"
    assert worker.request("DELETE", "/connectors/life").status_code == 204
    assert worker.get("/connectors/life").json() == {"error_code": 404, "message": "Connector life not found"}


def test_bad_requests_are_answered_with_kafka_errors(worker, tmp_path):
    bad_json = worker.request("POST", "/connectors", data=b"{not json", headers={"Content-Type": "application/json"})
    assert bad_json.status_code == 400 and bad_json.json()["error_code"] == 400
    unknown = worker.request("POST", "/connectors", json={"name": "u", "config": {"connector.class": "NoSuchThing"}})
    assert unknown.status_code == 400 and "NoSuchThing" in unknown.json()["message"]
    invalid = worker.request("POST", "/connectors", json={"name": "v", "config": {
        "connector.class": "FileStreamSource", "batch.size": "many", "tasks.max": "0"}})
    assert invalid.status_code == 400 and "batch.size" in invalid.json()["message"]
    validated = worker.request("PUT", "/connector-plugins/FileStreamSource/config/validate", json={
        "connector.class": "FileStreamSource", "batch.size": "many", "tasks.max": "0", "name": "v"}).json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in validated["configs"] if c["value"]["errors"]}
    assert set(errors) == {"batch.size", "tasks.max", "topic"} and validated["error_count"] == 3
    assert validated["name"] == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    definition = next(c["definition"] for c in validated["configs"] if c["definition"]["name"] == "batch.size")
    assert definition["type"] == "INT" and definition["default_value"] == "2000"
    assert worker.get("/connectors/nobody/status").status_code == 404
    assert worker.get("/no/such/path").json()["error_code"] == 404
    assert worker.get("/").status_code == 200  # still serving


def test_a_task_raising_in_poll_is_failed_with_its_trace_and_restarts(worker, tmp_path, topic_name):
    config = {"connector.class": "ExplodingSource", "topic": topic_name}
    assert worker.request("POST", "/connectors", json={"name": "boom", "config": config}).status_code == 201
    wait_until(lambda: state_of(worker, "boom") == ("RUNNING", ["FAILED"]), 30, "the task to fail")
    trace = worker.get("/connectors/boom/tasks/0/status").json()["trace"]
    assert "the source is on fire" in trace
    restarted = worker.request("POST", "/connectors/boom/restart?includeTasks=true&onlyFailed=true")
    assert restarted.status_code == 202 and restarted.json()["name"] == "boom"
    assert worker.request("POST", "/connectors/boom/tasks/0/restart").status_code == 204
    wait_until(lambda: state_of(worker, "boom") == ("RUNNING", ["FAILED"]), 30, "the task to fail again")
    metrics = worker.get("/metrics").text
    assert 'kafka_connect_connector_task_metrics_status{connector="boom",task="0",status="failed"} 1' in metrics
    assert worker.request("DELETE", "/connectors/boom").status_code == 204


def test_a_poison_record_goes_to_the_dead_letter_queue_with_its_headers(worker, tmp_path, topic_name):
    sink_file, dlq = tmp_path / "out.txt", f"{topic_name}-dlq"
    with Producer(bootstrap_servers=worker.worker["bootstrap.servers"]) as producer:
        for value in (b'{"schema":{"type":"string"},"payload":"ok 1"}', b"{poison",
                      b'{"schema":{"type":"string"},"payload":"ok 2"}'):
            producer.send(topic_name, value)
        producer.flush()
    config = {"connector.class": "FileStreamSink", "topics": topic_name, "file": str(sink_file),
              "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
              "errors.deadletterqueue.context.headers.enable": "true", "errors.log.enable": "true"}
    assert worker.request("POST", "/connectors", json={"name": "dlq-sink", "config": config}).status_code == 201
    wait_until(lambda: sink_file.exists() and sink_file.read_text() == "ok 1\nok 2\n", 30, "the good records")
    with Consumer(bootstrap_servers=worker.worker["bootstrap.servers"], auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(dlq, 0)])
        records: list = []
        wait_until(lambda: records, 30, "the DLQ record", step=lambda: records.extend(consumer.poll(0.5)))
    headers = dict(records[0].headers)
    assert records[0].value == b"{poison"
    assert headers["__connect.errors.topic"] == topic_name.encode()
    assert headers["__connect.errors.offset"] == b"1"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert headers["__connect.errors.connector.name"] == b"dlq-sink"
    assert b"JsonConverter" in headers["__connect.errors.class.name"]
    assert state_of(worker, "dlq-sink") == ("RUNNING", ["RUNNING"])
    assert worker.request("DELETE", "/connectors/dlq-sink").status_code == 204


def test_a_sink_task_raising_in_put_fails_alone(worker, tmp_path, topic_name):
    with Producer(bootstrap_servers=worker.worker["bootstrap.servers"]) as producer:
        producer.send(topic_name, b'{"schema":{"type":"string"},"payload":"x"}')
        producer.flush()
    config = {"connector.class": "exploding.ExplodingSinkConnector", "topics": topic_name}
    assert worker.request("POST", "/connectors", json={"name": "full", "config": config}).status_code == 201
    wait_until(lambda: state_of(worker, "full") == ("RUNNING", ["FAILED"]), 30, "the sink task to fail")
    assert "the sink is full" in worker.get("/connectors/full/status").json()["tasks"][0]["trace"]
    assert worker.get("/connectors").status_code == 200
    assert worker.request("DELETE", "/connectors/full").status_code == 204


def test_the_connector_written_in_the_docs_runs_and_resumes_from_its_offset(worker, topic_name):
    config = {"connector.class": "Counter", "topic": topic_name, "count": "5"}
    assert worker.request("POST", "/connectors", json={"name": "counter", "config": config}).status_code == 201
    with Consumer(bootstrap_servers=worker.worker["bootstrap.servers"], auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic_name, 0)])
        values: list = []
        wait_until(lambda: len(values) >= 5, 30, "5 numbers",
                   step=lambda: values.extend(json.loads(r.value)["payload"] for r in consumer.poll(0.5)))
        assert values == [0, 1, 2, 3, 4]
        wait_until(lambda: worker.get("/connectors/counter/offsets").json()["offsets"] == [
            {"partition": {"counter": "main"}, "offset": {"next": 5}}], 10, "the stored offset")
        # More numbers wanted: the restarted task goes on from 5, not from 0.
        config["count"] = "7"
        assert worker.request("PUT", "/connectors/counter/config", json=config).status_code == 200
        wait_until(lambda: len(values) >= 7, 30, "7 numbers",
                   step=lambda: values.extend(json.loads(r.value)["payload"] for r in consumer.poll(0.5)))
    assert values == [0, 1, 2, 3, 4, 5, 6]
    assert worker.request("DELETE", "/connectors/counter").status_code == 204

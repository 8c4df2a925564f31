"""The console in a real headless browser: Debian's chromium driven by Playwright.

One browser for the module (a fresh profile directory); each test opens its own page and
fails on any console error or uncaught exception the page reports. Screenshots of every
page land in tests/artifacts/console/ (not committed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from http_helpers import ARTIFACTS, create_topic, get_json, wait_serving, wait_until

from odradek.testing.process import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = ARTIFACTS / "console"
TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(TIMEOUT_MS)
        yield context
        context.close()


class Page:
    """A browser tab that records console errors and uncaught exceptions."""

    def __init__(self, context, base_url: str):
        self.base = base_url
        self.tab = context.new_page()
        self.errors: list[str] = []
        self.tab.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.tab.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))

    def open(self, route: str):
        self.tab.goto(f"{self.base}/{route}")
        self.tab.wait_for_selector(f'[data-loaded="{route}"]')
        return self.tab

    def by(self, testid: str):
        return self.tab.get_by_test_id(testid)

    def shot(self, name: str) -> None:
        self.tab.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self, allowed: str | None = None) -> None:
        errors = [e for e in self.errors if not (allowed and re.search(allowed, e))]
        self.tab.close()
        assert errors == [], errors


@pytest.fixture
def page(browser, http_broker):
    tab = Page(browser, http_broker.http_url)
    yield tab
    if not tab.tab.is_closed():  # the test failed before checking for errors
        tab.tab.close()


def produce(broker, topic: str, n: int, partition: int = 0, value=lambda i: b"record-%d" % i, **extra) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=value(i), partition=partition, **extra)
    assert p.flush(15) == 0


def commit(broker, group: str, topic: str, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def test_every_page_loads_without_console_errors(page, http_broker, topic_name):
    group = f"g-{topic_name}"
    create_topic(http_broker, topic_name, 2)
    produce(http_broker, topic_name, 25, value=lambda i: json.dumps({"order": i, "item": "book"}).encode())
    commit(http_broker, group, topic_name, {0: 10})
    pages = {  # route: (a landmark on it, a text it must show)
        "#/": ("card-partitions", "broker 0"),
        "#/topics": ("topics-table", topic_name),
        f"#/topics/{topic_name}": ("partitions-table", "High watermark"),
        "#/groups": ("groups-table", group),
        f"#/groups/{group}": ("group-offsets", "Committed"),
        "#/brokers": ("brokers-table", "controller"),
    }
    for route, (landmark, text) in pages.items():
        tab = page.open(route)
        page.by(landmark).wait_for()
        assert text in tab.locator("main").inner_text(), route
        name = re.sub(r"[^a-z]+", "-", route.split("/")[1] or "overview").strip("-")
        page.shot(name)
    tab.goto(f"{http_broker.http_url}/#/topics/no-such-topic")
    assert "does not exist" in page.by("page-error").inner_text()
    page.close(allowed=r"404 \(Not Found\)")  # the unknown topic's page asked for it


def test_a_produced_record_appears_in_the_message_browser(page, http_broker, topic_name):
    create_topic(http_broker, topic_name, 2)
    record = {"order": 42, "item": "tea", "note": "ünïcode"}
    produce(
        http_broker,
        topic_name,
        1,
        partition=1,
        value=lambda i: json.dumps(record, ensure_ascii=False).encode(),  # UTF-8 bytes
        key=b"customer-7",
        headers=[("source", b"browser-test")],
    )
    tab = page.open(f"#/topics/{topic_name}")
    page.by("browse-partition").select_option("1")
    page.by("browse-load").click()
    row = page.by("message-row")
    row.wait_for()
    assert row.count() == 1
    text = row.inner_text()
    assert "customer-7" in text and '"note": "ünïcode"' in text and "source: browser-test" in text

    page.by("browse-format").select_option("json")
    assert '"order": 42' in tab.locator('[data-testid="message-row"] pre').first.inner_text()
    page.shot("topic-messages")
    page.by("browse-format").select_option("hex")
    assert "63 75 73 74 6f 6d 65 72 2d 37" in row.inner_text()  # "customer-7"

    page.by("browse-mode").select_option("offset")
    page.by("browse-position").fill("5")
    page.by("browse-load").click()
    tab.get_by_text("No records there.").wait_for()  # partition 1 ends at offset 1
    page.close()


def test_a_groups_lag_appears_then_drops_after_consuming(page, http_broker, topic_name):
    group = f"g-{topic_name}"
    create_topic(http_broker, topic_name)
    produce(http_broker, topic_name, 40)
    commit(http_broker, group, topic_name, {0: 10})
    page.open(f"#/groups/{group}")
    lag = page.by("group-total-lag").locator(".card-value")
    assert lag.inner_text() == "30"
    assert page.by("offset-row").inner_text().split("\t")[-1].strip() == "30"

    c = Consumer({"bootstrap.servers": http_broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    c.subscribe([topic_name])
    got = []
    wait_until(lambda: got.extend(c.consume(30 - len(got), timeout=0.5)) or len(got) >= 30, 30, message="30 records")
    c.commit(asynchronous=False)
    c.close()
    wait_until(lambda: lag.inner_text() == "0", 20, message="the lag to drop to 0")  # the live refresh
    chart = page.by("lag-chart")
    wait_until(lambda: int(chart.get_attribute("data-points")) >= 3, 20, message="lag chart points")
    page.shot("group-lag")
    page.close()


def test_the_live_chart_gets_new_points(page, http_broker, topic_name):
    create_topic(http_broker, topic_name)
    page.open("#/")
    chart = page.by("overview-chart")
    stop = threading.Event()

    def traffic():
        p = Producer({"bootstrap.servers": http_broker.bootstrap_servers, "linger.ms": 5})
        while not stop.is_set():
            for _ in range(50):
                p.produce(topic_name, value=b"t" * 200)
            p.flush(5)
            stop.wait(0.1)

    writer = threading.Thread(target=traffic)
    writer.start()
    try:
        start = int(chart.get_attribute("data-points"))
        wait_until(lambda: int(chart.get_attribute("data-points")) >= start + 3, 30, message="3 new chart points")
        assert chart.locator("canvas").count() == 1  # uPlot drew it
    finally:
        stop.set()
        writer.join()
    page.shot("overview-live")
    page.close()


def test_actions_happen_only_after_confirmation(page, http_broker, topic_name):
    url = http_broker.http_url
    tab = page.open("#/topics")
    page.by("create-topic").click()
    page.by("new-topic-name").fill(topic_name)
    page.by("new-topic-partitions").fill("2")
    page.by("create-topic-submit").click()
    assert page.by("confirm-dialog").is_visible()
    page.by("confirm-cancel").click()
    assert topic_name not in {t["name"] for t in get_json(url, "/v1/topics")}

    page.by("create-topic-submit").click()
    page.by("confirm-ok").click()
    page.by("notice").filter(has_text=f"Created topic {topic_name} (2 partitions)").wait_for()
    page.by("topic-row").filter(has_text=topic_name).wait_for()

    produce(http_broker, topic_name, 10)
    page.open(f"#/topics/{topic_name}")
    page.by("delete-records").click()
    page.by("delete-offset").fill("3")
    page.by("delete-submit").click()
    page.by("confirm-ok").click()
    page.by("notice").filter(has_text="Partition 0 now starts at offset 3").wait_for()
    assert get_json(url, f"/v1/topics/{topic_name}")["partitions"][0]["log_start"] == 3
    tab.wait_for_selector(f'[data-loaded="#/topics/{topic_name}"]')
    page.close()


def test_a_refused_action_shows_the_reason(page, http_broker, topic_name):
    group = f"g-{topic_name}"
    create_topic(http_broker, topic_name)
    produce(http_broker, topic_name, 5)
    c = Consumer({"bootstrap.servers": http_broker.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic_name])
    try:
        wait_until(lambda: c.poll(0.2) is not None or c.assignment(), 30, message="the consumer to join")
        wait_until(lambda: get_json(http_broker.http_url, f"/v1/groups/{group}")["state"] == "Stable", 30,
                   message="a stable group")  # fmt: skip
        page.open(f"#/groups/{group}")
        page.by("reset-offsets").click()
        page.by("reset-to").select_option("earliest")
        page.by("reset-submit").click()
        page.by("confirm-ok").click()
        error = page.by("notice-error")
        error.wait_for()
        assert "has active members; stop its consumers first" in error.inner_text()
        page.shot("refused-action")
    finally:
        c.close()
    page.close(allowed=r"409 \(Conflict\)")


def test_the_remote_console_serves_the_same_pages(browser, http_broker, topic_name, tmp_path):
    create_topic(http_broker, topic_name)
    produce(http_broker, topic_name, 3)
    url = f"http://127.0.0.1:{free_port()}"
    with open(tmp_path / "console.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "console", "-b", http_broker.bootstrap_servers, "--listen", url],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_serving(url)
        remote = Page(browser, url)
        tab = remote.open("#/")
        remote.by("card-brokers").wait_for()
        cluster_id = get_json(http_broker.http_url, "/v1/cluster")["cluster_id"]
        label = tab.locator("#cluster-label")
        wait_until(lambda: label.inner_text().strip(), message="the header label")
        assert label.inner_text().strip() == f"cluster {cluster_id}"  # no broker serves this page
        remote.open(f"#/topics/{topic_name}")
        remote.by("browse-load").click()
        remote.by("message-row").first.wait_for()
        assert remote.by("message-row").count() == 3
        remote.shot("remote-topic")
        remote.close()
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_header_names_the_broker_and_the_cluster_and_topic_ids_read_as_in_the_cli(page, http_broker, topic_name):
    """The header: the serving broker's id and the cluster id, each labelled (the cluster id
    as Kafka's clients see it); a topic id in the console as `odradek topics describe` prints
    it (Kafka's URL-safe base64), in the page and the JSON API."""
    from confluent_kafka.admin import AdminClient

    create_topic(http_broker, topic_name)
    cluster_id = AdminClient({"bootstrap.servers": http_broker.bootstrap_servers}).list_topics(timeout=15).cluster_id
    assert cluster_id
    tab = page.open("#/")
    label = tab.locator("#cluster-label")
    wait_until(lambda: label.inner_text().strip(), message="the header label")
    assert label.inner_text().strip() == f"broker 0 · cluster {cluster_id}"

    described = subprocess.run(
        [sys.executable, "-m", "odradek", "topics", "describe", topic_name, "-b", http_broker.bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0, described.stderr
    cli_id = re.search(r"TopicId: (\S+)", described.stdout).group(1)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cli_id), cli_id
    assert get_json(http_broker.http_url, f"/v1/topics/{topic_name}")["topic_id"] == cli_id
    tab = page.open(f"#/topics/{topic_name}")
    page.by("partitions-table").wait_for()
    assert f"Topic id {cli_id}" in tab.locator("main").inner_text()
    page.close()

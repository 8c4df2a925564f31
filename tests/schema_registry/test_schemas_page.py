"""The console's Schemas page in Debian's chromium (Playwright), on a broker serving its
registry beside it: the subjects with their levels, a subject's versions, the diff between
two versions, as a user sees them; and the console's read-only route to the registry."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import requests
from registry_support import CONTENT_TYPE, wait_until_ready

from odradek.testing.process import BrokerProcess, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "http"))
from test_console_browser import Page, browser  # noqa: E402, F401  (browser: the module's chromium)

V1 = json.dumps({"type": "record", "name": "User", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]})  # fmt: skip
V2 = json.dumps({"type": "record", "name": "User", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
                            {"name": "email", "type": ["null", "string"], "default": None}]})  # fmt: skip
ORDER = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "total", "type": "double"}]})


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A broker with its console and a registry beside it holding two subjects."""
    registry = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(tmp_path_factory.mktemp("schemas-page") / "data",
                           overrides={"schema.registry.listeners": registry}).start()  # fmt: skip
    try:
        wait_until_ready(registry, 60, broker.proc)

        def call(method: str, path: str, body: dict) -> dict:
            resp = requests.request(method, registry + path, json=body, headers={"Content-Type": CONTENT_TYPE}, timeout=30)
            assert resp.status_code == 200, resp.text
            return resp.json()

        call("POST", "/subjects/users-value/versions", {"schema": V1})
        call("POST", "/subjects/users-value/versions", {"schema": V2})
        call("PUT", "/config/users-value", {"compatibility": "FULL"})
        call("POST", "/subjects/orders-value/versions", {"schema": ORDER})
        yield broker
    finally:
        broker.stop()
    assert "Traceback" not in broker.log_text()


def test_the_schemas_page_shows_subjects_versions_levels_and_the_diff(browser, served):  # noqa: F811
    page = Page(browser, served.http_url)
    tab = page.open("#/schemas")
    rows = page.by("subject-row")
    assert rows.count() == 2
    text = {rows.nth(i).inner_text().split("\t")[0]: rows.nth(i).inner_text() for i in range(2)}
    assert "FULL" in text["users-value"] and "\t2\t" in text["users-value"]
    assert "BACKWARD (global)" in text["orders-value"]
    assert "BACKWARD" in page.by("schemas-global-level").inner_text()
    page.shot("schemas")
    # A subject: its two versions, its own level, and what version 2 added.
    page.by("subject-link").filter(has_text="users-value").click()
    tab.wait_for_selector('[data-loaded="#/schemas/users-value"]')
    assert page.by("version-row").count() == 2
    assert "FULL" in page.by("subject-level").inner_text()
    assert "this subject" in page.by("subject-level").inner_text()
    added = page.by("diff-added").all_inner_texts()
    removed = page.by("diff-removed").all_inner_texts()
    assert any('"name": "email"' in line for line in added), added
    assert all(line.startswith("+ ") for line in added) and all(line.startswith("- ") for line in removed)
    assert not any("email" in line or '"name": "id"' in line for line in removed), removed
    assert page.by("diff-same").filter(has_text='"name": "id"').count() == 1
    assert "1 and version 2" in page.by("diff-summary").inner_text()
    page.shot("schemas-subject")
    # The same version on both sides: no difference.
    page.by("diff-from").select_option("2")
    assert "are the same" in page.by("diff-summary").inner_text()
    assert page.by("diff-added").count() == 0
    # A version's schema, pretty-printed.
    page.by("version-link").filter(has_text="1").click()
    assert '"name": "email"' not in page.by("schema-text").inner_text()
    assert "Version 1\n{" in page.tab.locator("main").inner_text()  # the heading, then the schema
    page.close()


def test_the_console_route_reads_the_registry_and_refuses_what_is_not_a_read(served):
    base = served.http_url
    assert requests.get(f"{base}/v1/schemas/subjects", timeout=10).json() == ["orders-value", "users-value"]
    assert requests.get(f"{base}/v1/schemas/config/orders-value", timeout=10).json() == {"compatibilityLevel": None}
    missing = requests.get(f"{base}/v1/schemas/subjects/nope/versions", timeout=10)
    assert missing.status_code == 404 and missing.json()["error_code"] == 40401 and "nope" in missing.json()["error"]
    assert requests.get(f"{base}/v1/schemas/metrics", timeout=10).status_code == 404
    assert requests.post(f"{base}/v1/schemas/subjects/x/versions", json={"schema": ORDER}, timeout=10).status_code == 404
    assert requests.get(f"{base}/v1/schemas/subjects", timeout=10).json() == ["orders-value", "users-value"]

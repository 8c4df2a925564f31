// The Connectors page of Odradek's console: the connectors of the configured Kafka Connect
// clusters with their state, worker and tasks (a FAILED one with its trace), a connector's
// config, and pause / resume / restart. Read through the console's /v1/connect route, which
// asks the workers' REST APIs server-side (docs/console.md). It uses console.js's helpers
// (h, api, post, act, table, card) and adds its routes to console.js's ROUTES.
"use strict";

const CONNECT_API = "/v1/connect";

function stateTag(state) {
  const kind = { RUNNING: "ok", FAILED: "bad", PAUSED: "warn", STOPPED: "warn" }[state] || "";
  return h("span", { class: `state ${kind}`, testid: "state" }, state || "—");
}

function taskSummary(tasks) {
  if (!tasks.length) return h("span", { class: "muted" }, "no tasks");
  return h("span", {}, tasks.map((t) => h("span", { class: "task-chip", testid: "task-chip" }, `${t.id}: `, stateTag(t.state))));
}

function connectorActions(cluster, c) {
  const run = (action, title, text) => () => act(title, text,
    () => post(`${CONNECT_API}/${cluster}/connectors/${enc(c.name)}/${action}`, {}),
    () => `${title}: ${c.name} (the worker applies it; the state follows within seconds).`);
  return h("span", { class: "actions inline" },
    c.state === "PAUSED"
      ? h("button", { testid: "connector-resume", onclick: run("resume", "Resume", `Resume connector "${c.name}"?`) }, "Resume")
      : h("button", { testid: "connector-pause", onclick: run("pause", "Pause", `Pause connector "${c.name}" and its tasks?`) }, "Pause"),
    h("button", { testid: "connector-restart", onclick: run("restart", "Restart", `Restart connector "${c.name}" and all its tasks?`) }, "Restart"));
}

function notConfigured(page, data) {
  page.replaceChildren(h("h1", {}, "Connectors"),
    h("div", { class: "panel", testid: "connect-not-configured" },
      h("p", {}, "No Kafka Connect cluster is configured for this console."),
      h("p", {}, "On a broker, set ", h("code", {}, "console.connect.urls=http://127.0.0.1:8083"),
        " (comma-separated REST URLs of Connect workers); for ", h("code", {}, "odradek console"), ", give ",
        h("code", {}, "--connect-url http://127.0.0.1:8083"), "."),
      h("p", { class: "muted" }, data.message)));
}

async function connectorsPage(page) {
  const holder = h("div");
  let data = await api(CONNECT_API);
  if (!data.configured) { notConfigured(page, data); return async () => {}; }
  function draw() {
    holder.replaceChildren(...data.clusters.map((cl) => h("section", { testid: "connect-cluster" },
      h("h2", {}, `Connect cluster ${cl.url}`),
      cl.error
        ? h("p", { class: "error", testid: "connect-error" }, cl.error)
        : h("p", { class: "muted" }, `Version ${cl.version || "?"} · Kafka cluster ${cl.kafka_cluster_id || "?"} · ${cl.connectors.length} connector(s)`),
      cl.error ? null : table([
        { label: "Connector", key: "name", render: (c) => h("a", { href: `#/connectors/${cl.index}/${enc(c.name)}`, testid: "connector-link" }, c.name) },
        { label: "Type", key: "type" },
        { label: "State", key: "state", render: (c) => stateTag(c.state) },
        { label: "Worker", key: "worker_id" },
        { label: "Tasks", key: "tasks", sortValue: (c) => c.tasks.length, render: (c) => taskSummary(c.tasks) },
        { label: "", key: "actions", render: (c) => connectorActions(cl.index, c) },
      ], cl.connectors, { testid: "connectors-table", rowTestid: "connector-row", sortable: true, sort: { key: "name", desc: false },
        empty: "No connectors on this cluster yet." }))));
  }
  draw();
  page.replaceChildren(h("h1", {}, "Connectors"), holder);
  return async () => { data = await api(CONNECT_API); draw(); };
}

async function connectorPage(page, cluster, name) {
  const holder = h("div");
  const find = async () => {
    const data = await api(CONNECT_API);
    const cl = (data.clusters || []).find((x) => String(x.index) === cluster);
    if (!cl) throw new ApiFailure(data.message || `no Connect cluster ${cluster}`);
    if (cl.error) throw new ApiFailure(cl.error);
    const c = cl.connectors.find((x) => x.name === name);
    if (!c) throw new ApiFailure(`no connector "${name}" on ${cl.url}`);
    return [cl, c];
  };
  function draw([cl, c]) {
    holder.replaceChildren(
      h("div", { class: "cards" },
        card("State", stateTag(c.state), "connector-state"),
        card("Type", c.type || "—", "connector-type"),
        card("Worker", c.worker_id || "—", "connector-worker"),
        card("Tasks", String(c.tasks.length), "connector-task-count")),
      h("p", { class: "muted" }, `On ${cl.url}`),
      c.trace ? h("pre", { class: "payload panel trace", testid: "connector-trace" }, c.trace) : null,
      h("h2", {}, "Tasks"),
      table([
        { label: "Task", key: "id", numeric: true, render: (t) => String(t.id) },
        { label: "State", key: "state", render: (t) => stateTag(t.state) },
        { label: "Worker", key: "worker_id" },
        { label: "Trace", key: "trace", render: (t) => t.trace ? h("pre", { class: "payload trace", testid: "task-trace" }, t.trace) : "—" },
      ], c.tasks, { testid: "tasks-table", rowTestid: "task-row", empty: "No tasks." }),
      h("h2", {}, "Config"),
      table([{ label: "Key", key: "key" }, { label: "Value", key: "value" }],
        Object.entries(c.config).sort().map(([key, value]) => ({ key, value })), { testid: "connector-config", rowTestid: "config-row", sortable: true }),
      h("h2", {}, "Actions"), connectorActions(Number(cluster), c));
  }
  draw(await find());
  page.replaceChildren(h("h1", {}, h("a", { href: "#/connectors" }, "Connectors"), " / ", name), holder);
  return async () => draw(await find());
}

ROUTES.push(
  [/^#\/connectors$/, "connectors", connectorsPage],
  [/^#\/connectors\/(\d+)\/(.+)$/, "connectors", connectorPage],
);

// Odradek's console: a small single-page app over the JSON API (/v1, docs/console.md).
// No build step and no framework: pages are functions that fetch, then build DOM nodes
// with h() (text is always set as text, never parsed as HTML). Each page may register
// a refresh function that runs every REFRESH_MS until the page is left; live charts
// (uPlot, vendored) append one point per refresh.
"use strict";

const REFRESH_MS = 2000;
const CHART_POINTS = 300; // ten minutes at one point per two seconds

// -- small helpers ------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "testid") el.dataset.testid = value;
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function enc(part) { return encodeURIComponent(part); }

function fmtInt(n) { return n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"); }

function fmtBytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = Number(n);
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + units[i];
}

function fmtRate(n, unit) {
  if (n === null || n === undefined || Number.isNaN(n)) return "—";
  return (unit === "B" ? fmtBytes(n) : Number(n).toFixed(n < 10 ? 1 : 0)) + (unit === "B" ? "/s" : " msg/s");
}

function fmtTime(ms) {
  if (ms === null || ms === undefined || ms < 0) return "—";
  return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
}

class ApiFailure extends Error {}

async function api(path, options) {
  const response = await fetch(path, options);
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    throw new ApiFailure((body && body.error) || `${response.status} ${response.statusText}`);
  }
  return body;
}

function post(path, data) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(data) });
}

function notice(text, kind) {
  const el = document.getElementById("notice");
  el.textContent = text;
  el.className = kind || "info";
  el.dataset.testid = kind === "error" ? "notice-error" : "notice";
  el.hidden = false;
  clearTimeout(notice.timer);
  notice.timer = setTimeout(() => { el.hidden = true; }, kind === "error" ? 15000 : 6000);
}

// Resolves true when the user confirms ``text`` in the dialog.
function confirmAction(title, text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

// Runs ``action`` (a promise-returning function) after a confirmation; reports the result.
async function act(title, text, action, done) {
  if (!(await confirmAction(title, text))) return;
  try {
    const result = await action();
    notice(done(result), "info");
    await router();
  } catch (e) {
    notice(e.message, "error");
  }
}

// -- tables -------------------------------------------------------------------------------

// columns: [{label, key, render?, numeric?}]; sorting by clicking a header when sortable.
function table(columns, rows, options) {
  const opts = options || {};
  const state = opts.sort || { key: null, desc: false };
  const wrap = h("div", { class: "table-wrap" });
  function draw() {
    let sorted = rows;
    if (state.key) {
      const col = columns.find((c) => c.key === state.key);
      sorted = [...rows].sort((a, b) => {
        const x = col.sortValue ? col.sortValue(a) : a[col.key];
        const y = col.sortValue ? col.sortValue(b) : b[col.key];
        const cmp = x === y ? 0 : (x === null || x === undefined) ? -1 : (y === null || y === undefined) ? 1 : x < y ? -1 : 1;
        return state.desc ? -cmp : cmp;
      });
    }
    const head = h("tr", {}, columns.map((c) => h("th", {
      class: (c.numeric ? "num " : "") + (opts.sortable ? "sortable" : ""),
      onclick: opts.sortable ? () => {
        state.desc = state.key === c.key ? !state.desc : false;
        state.key = c.key;
        draw();
      } : null,
    }, c.label, state.key === c.key ? (state.desc ? " ▼" : " ▲") : "")));
    const body = sorted.map((row) => h("tr", { testid: opts.rowTestid },
      columns.map((c) => h("td", { class: c.numeric ? "num" : "" }, c.render ? c.render(row) : fmtCell(row[c.key])))));
    const empty = rows.length ? null : h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, opts.empty || "Nothing here yet."));
    wrap.replaceChildren(h("table", { testid: opts.testid }, h("thead", {}, head), h("tbody", {}, body, empty)));
  }
  draw();
  return wrap;
}

function fmtCell(v) {
  if (v === null || v === undefined) return "—";
  if (Array.isArray(v)) return v.join(", ");
  if (typeof v === "number") return fmtInt(v);
  return String(v);
}

function card(label, value, testid) {
  return h("div", { class: "card", testid }, h("div", { class: "card-value" }, value), h("div", { class: "card-label" }, label));
}

// -- live charts --------------------------------------------------------------------------

// A time series chart; ``series`` names its lines. ``push(t, values)`` appends a point.
function liveChart(title, series, testid, format) {
  const box = h("div", { class: "chart", testid });
  const data = [[], ...series.map(() => [])];
  const colors = ["#2f6fde", "#d9534f", "#3c9d5d", "#a066c8", "#e08a1e", "#1aa3a3"];
  let plot = null;
  function make() {
    const width = Math.max((box.clientWidth || 600) - 20, 300);
    plot = new uPlot({
      title, width, height: 220,
      scales: { x: { time: true } },
      series: [{}, ...series.map((name, i) => ({ label: name, stroke: colors[i % colors.length], width: 2 }))],
      axes: [{ space: 90 }, { size: 80, values: (u, ticks) => ticks.map((v) => (format ? format(v) : fmtInt(v))) }],
    }, data, box);
  }
  box.dataset.points = "0";
  return {
    el: box,
    push(tSeconds, values) {
      data[0].push(tSeconds);
      values.forEach((v, i) => data[i + 1].push(v));
      if (data[0].length > CHART_POINTS) data.forEach((col) => col.shift());
      box.dataset.points = String(data[0].length);
      if (!plot && box.isConnected && window.uPlot) make();
      else if (plot) plot.setData(data);
    },
  };
}

// Rate of a counter between two samples, per second (null on the first or after a reset).
function rater() {
  let last = null;
  return (tMs, value) => {
    const prev = last;
    last = { tMs, value };
    if (!prev || value < prev.value || tMs <= prev.tMs) return null;
    return (value - prev.value) * 1000 / (tMs - prev.tMs);
  };
}

// -- pages --------------------------------------------------------------------------------

async function overviewPage(page) {
  const cluster = await api("/v1/cluster");
  const local = cluster.io !== null && cluster.io !== undefined;
  const chart = local
    ? liveChart("Bytes per second", ["in", "out"], "overview-chart", (v) => fmtBytes(v) + "/s")
    : liveChart("Messages per second (from log end offsets)", ["in"], "overview-chart");
  const rates = [rater(), rater()];
  const cards = h("div", { class: "cards" });
  function drawCards(c) {
    cards.replaceChildren(
      card("Brokers", fmtInt(c.brokers.length), "card-brokers"),
      card("Controller", c.controller_id >= 0 ? `broker ${c.controller_id}` : "none", "card-controller"),
      card("Racks", c.racks.length ? c.racks.join(", ") : "—", "card-racks"),
      card("Topics", fmtInt(c.topics) + (c.internal_topics ? ` (+${c.internal_topics} internal)` : ""), "card-topics"),
      card("Partitions", fmtInt(c.partitions), "card-partitions"),
      card("Under-replicated", fmtInt(c.under_replicated), "card-under-replicated"),
      card("Offline", fmtInt(c.offline), "card-offline"),
    );
    cards.querySelector('[data-testid="card-under-replicated"]').classList.toggle("bad", c.under_replicated > 0);
    cards.querySelector('[data-testid="card-offline"]').classList.toggle("bad", c.offline > 0);
  }
  function sample(c) {
    const t = c.time_ms || Date.now();
    const values = local
      ? [rates[0](t, c.io.bytes_in), rates[1](t, c.io.bytes_out)]
      : [rates[0](t, c.end_offset_sum)];
    if (values.every((v) => v !== null)) chart.push(t / 1000, values);
  }
  const brokers = h("div");
  function drawBrokers(c) {
    brokers.replaceChildren(table([
      { label: "Broker", key: "id", render: (b) => h("span", {}, String(b.id), b.controller ? h("span", { class: "tag" }, "controller") : null) },
      { label: "Host", key: "host" }, { label: "Port", key: "port", numeric: true, render: (b) => String(b.port) },
      { label: "Rack", key: "rack" }, { label: "Replicas", key: "replicas", numeric: true },
      { label: "Leaders", key: "leaders", numeric: true },
    ], c.brokers, { testid: "overview-brokers" }));
  }
  drawCards(cluster);
  drawBrokers(cluster);
  sample(cluster);
  page.replaceChildren(
    h("h1", {}, "Overview"),
    h("p", { class: "muted" }, `Cluster ${cluster.cluster_id || "?"}`),
    cards, h("h2", {}, "Throughput"), chart.el, h("h2", {}, "Brokers"), brokers,
  );
  return async () => {
    const c = await api("/v1/cluster");
    drawCards(c);
    drawBrokers(c);
    sample(c);
  };
}

async function topicsPage(page) {
  const rates = new Map();
  const sort = { key: "name", desc: false };
  const holder = h("div");
  let showInternal = false;
  function draw(rows, timeMs) {
    for (const row of rows) {
      if (!rates.has(row.name)) rates.set(row.name, rater());
      row.rate = rates.get(row.name)(timeMs, row.end_offset_sum);
    }
    const shown = rows.filter((r) => showInternal || !r.internal);
    holder.replaceChildren(table([
      { label: "Topic", key: "name", render: (r) => h("a", { href: `#/topics/${enc(r.name)}` }, r.name, r.internal ? h("span", { class: "tag" }, "internal") : null) },
      { label: "Partitions", key: "partitions", numeric: true },
      { label: "Replication", key: "replication_factor", numeric: true },
      { label: "Size", key: "size", numeric: true, render: (r) => fmtBytes(r.size) },
      { label: "Messages", key: "end_offset_sum", numeric: true },
      { label: "Rate", key: "rate", numeric: true, render: (r) => fmtRate(r.rate, "msg") },
      { label: "Under-replicated", key: "under_replicated", numeric: true },
    ], shown, { sortable: true, sort, testid: "topics-table", rowTestid: "topic-row", empty: "No topics yet." }));
  }
  const toggle = h("label", { class: "inline" }, h("input", {
    type: "checkbox", onchange: (e) => { showInternal = e.target.checked; refresh(); },
  }), " show internal topics");
  const refresh = async () => draw(await api("/v1/topics"), Date.now());
  await refresh();
  page.replaceChildren(
    h("div", { class: "title-row" }, h("h1", {}, "Topics"),
      h("button", { onclick: () => createTopicForm(page), testid: "create-topic" }, "Create topic")),
    toggle, holder,
  );
  return refresh;
}

function createTopicForm(page) {
  const name = h("input", { name: "name", required: true, placeholder: "orders", testid: "new-topic-name" });
  const partitions = h("input", { name: "partitions", type: "number", min: "1", value: "1", testid: "new-topic-partitions" });
  const replication = h("input", { name: "replication", type: "number", min: "1", placeholder: "broker default" });
  const configs = h("textarea", { name: "configs", rows: "3", placeholder: "retention.ms=86400000\ncleanup.policy=compact" });
  const form = h("form", {
    class: "panel", testid: "create-topic-form",
    onsubmit: (e) => {
      e.preventDefault();
      const parsed = {};
      for (const line of configs.value.split("\n")) {
        if (!line.trim()) continue;
        const at = line.indexOf("=");
        if (at < 1) { notice(`configs: expected key=value, got "${line}"`, "error"); return; }
        parsed[line.slice(0, at).trim()] = line.slice(at + 1).trim();
      }
      const spec = { name: name.value.trim(), partitions: Number(partitions.value || -1), replication_factor: Number(replication.value || -1), configs: parsed };
      act("Create topic", `Create topic "${spec.name}" with ${spec.partitions} partition(s)?`,
        () => post("/v1/topics", spec), (r) => `Created topic ${r.name} (${r.partitions} partitions).`);
    },
  },
  h("h3", {}, "New topic"),
  h("label", {}, "Name ", name), h("label", {}, "Partitions ", partitions),
  h("label", {}, "Replication factor ", replication), h("label", {}, "Configs (one key=value per line) ", configs),
  h("menu", {}, h("button", { type: "submit", testid: "create-topic-submit" }, "Create…"),
    h("button", { type: "button", onclick: () => form.remove() }, "Cancel")));
  page.querySelector(".title-row").after(form);
  name.focus();
}

async function topicPage(page, name) {
  let topic = await api(`/v1/topics/${enc(name)}`);
  const partsHolder = h("div");
  function drawPartitions(t) {
    partsHolder.replaceChildren(table([
      { label: "Partition", key: "partition", numeric: true },
      { label: "Leader", key: "leader", numeric: true },
      { label: "Replicas", key: "replicas" }, { label: "ISR", key: "isr" },
      { label: "Log start", key: "log_start", numeric: true },
      { label: "High watermark", key: "high_watermark", numeric: true },
      { label: "Log end", key: "log_end", numeric: true },
      { label: "Size", key: "size", numeric: true, render: (p) => fmtBytes(p.size) },
      { label: "Segments", key: "segments", numeric: true },
    ], t.partitions, { testid: "partitions-table" }));
  }
  drawPartitions(topic);
  const configs = h("div");
  let allConfigs = false;
  function drawConfigs() {
    const shown = topic.configs.filter((c) => allConfigs || !c.is_default);
    configs.replaceChildren(
      h("label", { class: "inline" }, h("input", { type: "checkbox", checked: allConfigs, onchange: (e) => { allConfigs = e.target.checked; drawConfigs(); } }),
        ` show defaults too (${topic.configs.length} configs)`),
      table([
        { label: "Config", key: "name" },
        { label: "Value", key: "value", render: (c) => c.sensitive ? "(hidden)" : fmtCell(c.value) },
        { label: "Source", key: "source", render: (c) => h("span", { class: c.is_default ? "muted" : "" }, c.source) },
      ], shown, { sortable: true, testid: "configs-table", empty: "Every config has its default value." }));
  }
  drawConfigs();

  const actions = h("div", { class: "actions" },
    h("button", { class: "danger", testid: "delete-records", onclick: () => deleteRecordsForm(actions, topic) }, "Delete records…"));
  page.replaceChildren(
    h("div", { class: "title-row" }, h("h1", {}, `Topic ${topic.name}`), topic.internal ? h("span", { class: "tag" }, "internal") : null),
    h("p", { class: "muted" }, `Topic id ${topic.topic_id}`),
    h("h2", {}, "Partitions"), partsHolder,
    h("h2", {}, "Messages"), messageBrowser(topic),
    h("h2", {}, "Configs"), configs,
    h("h2", {}, "Actions"), actions,
  );
  return async () => {
    topic = await api(`/v1/topics/${enc(name)}`);
    drawPartitions(topic);
  };
}

function deleteRecordsForm(holder, topic) {
  const partition = h("select", { testid: "delete-partition" }, topic.partitions.map((p) => h("option", { value: p.partition }, `partition ${p.partition}`)));
  const offset = h("input", { type: "number", min: "0", placeholder: "offset", testid: "delete-offset" });
  const form = h("form", {
    class: "panel",
    onsubmit: (e) => {
      e.preventDefault();
      const p = Number(partition.value);
      const o = Number(offset.value);
      act("Delete records", `Delete the records of ${topic.name} partition ${p} below offset ${o}? They cannot be brought back.`,
        () => post(`/v1/topics/${enc(topic.name)}/delete-records`, { partitions: { [p]: o } }),
        (r) => {
          const result = r.partitions[String(p)];
          if (result.error) throw new ApiFailure(result.error);
          return `Partition ${p} now starts at offset ${result.low_watermark}.`;
        });
    },
  }, h("label", {}, "Partition ", partition), h("label", {}, "Delete records below offset ", offset),
  h("menu", {}, h("button", { type: "submit", class: "danger", testid: "delete-submit" }, "Delete…")));
  holder.replaceChildren(form);
}

function messageBrowser(topic) {
  const partition = h("select", { testid: "browse-partition" }, topic.partitions.map((p) => h("option", { value: p.partition }, `partition ${p.partition}`)));
  const mode = h("select", { testid: "browse-mode" },
    h("option", { value: "latest" }, "latest"), h("option", { value: "offset" }, "from offset"), h("option", { value: "timestamp" }, "from time"));
  const position = h("input", { placeholder: "offset, or time as 2024-05-01T12:00:00Z", testid: "browse-position" });
  const limit = h("input", { type: "number", min: "1", max: "200", value: "20", testid: "browse-limit" });
  const format = h("select", { testid: "browse-format" },
    h("option", { value: "text" }, "text"), h("option", { value: "json" }, "JSON"), h("option", { value: "hex" }, "hex"));
  const results = h("div", { testid: "browse-results" });
  let last = null;

  function draw() {
    if (!last) return;
    const fmt = format.value;
    results.replaceChildren(
      h("p", { class: "muted" }, `Partition ${last.partition}: offsets ${last.log_start}–${last.high_watermark}; showing ${last.records.length} from ${last.start}.`),
      table([
        { label: "Offset", key: "offset", numeric: true },
        { label: "Timestamp", key: "timestamp", render: (r) => h("span", { title: r.timestamp_type }, fmtTime(r.timestamp)) },
        { label: "Key", key: "key", render: (r) => payload(r.key, r.key_size, fmt, true) },
        { label: "Value", key: "value", render: (r) => payload(r.value, r.value_size, fmt) },
        { label: "Headers", key: "headers", render: (r) => r.headers.length ? h("ul", { class: "headers" }, r.headers.map(([k, v]) => h("li", {}, `${k}: `, payload(v, v === null ? -1 : 1, "text")))) : "—" },
      ], last.records, { testid: "messages-table", rowTestid: "message-row", empty: "No records there." }));
  }

  async function load(e) {
    if (e) e.preventDefault();
    const params = new URLSearchParams({ partition: partition.value, limit: limit.value || "20" });
    const raw = position.value.trim();
    if (mode.value === "offset") params.set("offset", raw || "0");
    if (mode.value === "timestamp") {
      const ms = /^\d+$/.test(raw) ? Number(raw) : Date.parse(raw);
      if (Number.isNaN(ms)) { notice(`"${raw}" is not a time: use e.g. 2024-05-01T12:00:00Z or milliseconds`, "error"); return; }
      params.set("timestamp", String(ms));
    }
    try {
      last = await api(`/v1/topics/${enc(topic.name)}/messages?${params}`);
      draw();
    } catch (err) {
      notice(err.message, "error");
    }
  }

  format.addEventListener("change", draw);
  return h("form", { class: "browser", onsubmit: load },
    h("div", { class: "controls" }, partition, mode, position, h("label", { class: "inline" }, "max ", limit), h("label", { class: "inline" }, "show as ", format),
      h("button", { type: "submit", testid: "browse-load" }, "Load")),
    results);
}

function decode64(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

// A key, value or header value shown as text, pretty JSON or hex (``quiet``: no "not JSON" note).
function payload(b64, size, fmt, quiet) {
  if (b64 === null || b64 === undefined) return h("span", { class: "muted" }, "null");
  const bytes = decode64(b64);
  const cut = size > bytes.length ? h("span", { class: "muted" }, ` … (${fmtBytes(size)})`) : null;
  if (fmt === "hex") {
    const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
    return h("code", { class: "payload" }, hex, cut);
  }
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  if (fmt === "json") {
    try {
      return h("pre", { class: "payload" }, JSON.stringify(JSON.parse(text), null, 2), cut);
    } catch (e) {
      return h("span", { class: "payload" }, text, quiet ? null : h("span", { class: "muted" }, " (not JSON)"), cut);
    }
  }
  return h("span", { class: "payload" }, text, cut);
}

async function groupsPage(page) {
  const holder = h("div");
  const refresh = async () => {
    const rows = await api("/v1/groups");
    holder.replaceChildren(table([
      { label: "Group", key: "group_id", render: (g) => h("a", { href: `#/groups/${enc(g.group_id)}` }, g.group_id) },
      { label: "State", key: "state" },
      { label: "Members", key: "members", numeric: true },
      { label: "Partitions", key: "partitions", numeric: true },
      { label: "Lag", key: "lag", numeric: true, render: (g) => h("span", { testid: "group-lag" }, fmtInt(g.lag)) },
    ], rows, { sortable: true, sort: { key: "group_id", desc: false }, testid: "groups-table", rowTestid: "group-row", empty: "No consumer groups yet." }));
  };
  await refresh();
  page.replaceChildren(h("h1", {}, "Consumer groups"), holder);
  return refresh;
}

async function groupPage(page, groupId) {
  let group = await api(`/v1/groups/${enc(groupId)}`);
  const chart = liveChart("Lag (records behind the high watermark)", ["total lag"], "lag-chart");
  const summary = h("div", { class: "cards" });
  const members = h("div");
  const offsets = h("div");
  function draw(g) {
    summary.replaceChildren(
      card("State", g.state, "group-state"),
      card("Members", fmtInt(g.members.length), "group-members"),
      card("Total lag", fmtInt(g.lag), "group-total-lag"),
      card("Coordinator", g.coordinator === undefined || g.coordinator === null ? "—" : `broker ${g.coordinator}`),
    );
    members.replaceChildren(table([
      { label: "Member", key: "member_id" }, { label: "Client", key: "client_id" }, { label: "Host", key: "client_host" },
      { label: "Assignment", key: "assignment", render: (m) => m.assignment === null ? "—" : m.assignment.map(([t, p]) => `${t}-${p}`).join(", ") },
    ], g.members, { testid: "members-table", empty: "No members: the group is empty." }));
    offsets.replaceChildren(table([
      { label: "Topic", key: "topic", render: (o) => h("a", { href: `#/topics/${enc(o.topic)}` }, o.topic) },
      { label: "Partition", key: "partition", numeric: true },
      { label: "Committed", key: "committed", numeric: true },
      { label: "High watermark", key: "end", numeric: true },
      { label: "Lag", key: "lag", numeric: true },
    ], g.offsets, { sortable: true, testid: "group-offsets", rowTestid: "offset-row", empty: "No committed offsets." }));
    chart.push((g.time_ms || Date.now()) / 1000, [g.lag]);
  }
  const actions = h("div", { class: "actions" },
    h("button", { class: "danger", testid: "reset-offsets", onclick: () => resetOffsetsForm(actions, group) }, "Reset offsets…"));
  draw(group);
  page.replaceChildren(
    h("h1", {}, `Consumer group ${group.group_id}`),
    h("p", { class: "muted" }, group.protocol_type ? `Protocol ${group.protocol_type}${group.protocol ? " / " + group.protocol : ""}` : ""),
    summary, chart.el,
    h("h2", {}, "Offsets and lag"), offsets,
    h("h2", {}, "Members"), members,
    h("h2", {}, "Actions"), actions,
  );
  return async () => {
    group = await api(`/v1/groups/${enc(groupId)}`);
    draw(group);
  };
}

function resetOffsetsForm(holder, group) {
  // The topics the group committed on or is assigned; any topic can be typed otherwise.
  const assigned = group.members.flatMap((m) => (m.assignment || []).map(([t]) => t));
  const topics = [...new Set([...group.offsets.map((o) => o.topic), ...assigned])].sort();
  const topic = topics.length
    ? h("select", { testid: "reset-topic" }, topics.map((t) => h("option", { value: t }, t)))
    : h("input", { placeholder: "topic", testid: "reset-topic" });
  const to = h("select", { testid: "reset-to" },
    h("option", { value: "earliest" }, "earliest"), h("option", { value: "latest" }, "latest"),
    h("option", { value: "offset" }, "offset"), h("option", { value: "timestamp" }, "time"));
  const value = h("input", { placeholder: "offset, or time as 2024-05-01T12:00:00Z", testid: "reset-value" });
  const form = h("form", {
    class: "panel",
    onsubmit: (e) => {
      e.preventDefault();
      const spec = { topic: topic.value, to: to.value };
      if (to.value === "offset") spec.value = Number(value.value);
      if (to.value === "timestamp") spec.value = /^\d+$/.test(value.value) ? Number(value.value) : Date.parse(value.value);
      act("Reset offsets", `Reset group "${group.group_id}" on ${spec.topic} to ${spec.to}${spec.value !== undefined ? " " + value.value : ""}? Its consumers must be stopped.`,
        () => post(`/v1/groups/${enc(group.group_id)}/reset-offsets`, spec),
        (r) => `Offsets of ${r.group_id} on ${r.topic} reset: ${Object.entries(r.offsets).map(([p, o]) => `${p}→${o}`).join(", ")}.`);
    },
  }, h("label", {}, "Topic ", topic), h("label", {}, "To ", to), h("label", {}, "Value ", value),
  h("menu", {}, h("button", { type: "submit", class: "danger", testid: "reset-submit" }, "Reset…")));
  holder.replaceChildren(form);
}

async function brokersPage(page) {
  const holder = h("div");
  const refresh = async () => {
    const rows = await api("/v1/brokers");
    holder.replaceChildren(table([
      { label: "Broker", key: "id", numeric: true },
      { label: "Role", key: "controller", render: (b) => b.controller ? h("span", { class: "tag" }, "controller") : "" },
      { label: "Host", key: "host" }, { label: "Port", key: "port", numeric: true, render: (b) => String(b.port) }, { label: "Rack", key: "rack" },
      { label: "Replicas", key: "replicas", numeric: true }, { label: "Leaders", key: "leaders", numeric: true },
      { label: "Log size", key: "local", numeric: true, render: (b) => b.local ? fmtBytes(b.local.log_size) : "—" },
      { label: "Connections", key: "local", numeric: true, render: (b) => b.local ? fmtInt(b.local.connections) : "—" },
      { label: "Log dirs", key: "local", render: (b) => b.local ? b.local.log_dirs.join(", ") : "—" },
    ], rows, { testid: "brokers-table", rowTestid: "broker-row" }));
  };
  await refresh();
  page.replaceChildren(h("h1", {}, "Brokers"), holder);
  return refresh;
}

// -- the router ---------------------------------------------------------------------------

const ROUTES = [
  [/^#?\/?$/, "overview", overviewPage],
  [/^#\/topics$/, "topics", topicsPage],
  [/^#\/topics\/(.+)$/, "topics", topicPage],
  [/^#\/groups$/, "groups", groupsPage],
  [/^#\/groups\/(.+)$/, "groups", groupPage],
  [/^#\/brokers$/, "brokers", brokersPage],
];

let timer = null;
let generation = 0;

async function router() {
  clearInterval(timer);
  const mine = ++generation;
  const page = document.getElementById("page");
  const hash = location.hash || "#/";
  const route = ROUTES.find(([re]) => re.test(hash));
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", route && a.dataset.nav === route[1]));
  if (!route) {
    page.replaceChildren(h("h1", {}, "Not found"), h("p", {}, "No such page. ", h("a", { href: "#/" }, "Back to the overview.")));
    return;
  }
  const args = (hash.match(route[0]) || []).slice(1).map(decodeURIComponent);
  let refresh = null;
  try {
    refresh = await route[2](page, ...args);
  } catch (e) {
    if (mine !== generation) return;
    page.replaceChildren(h("h1", {}, "Could not load this page"), h("p", { class: "error", testid: "page-error" }, e.message));
    return;
  }
  if (mine !== generation || !refresh) return;
  page.dataset.loaded = hash;
  const live = document.getElementById("live");
  let busy = false; // a slow answer delays the next refresh instead of piling requests up
  timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      await refresh();
      live.classList.remove("stale");
      live.title = "Refreshing every 2 seconds";
    } catch (e) {
      live.classList.add("stale");
      live.title = `Refresh failed: ${e.message}`;
    } finally {
      busy = false;
    }
  }, REFRESH_MS);
}

async function start() {
  try {
    const c = await api("/v1/cluster");
    const cluster = `cluster ${c.cluster_id || "?"}`;
    document.getElementById("cluster-label").textContent = c.source === "broker" ? `broker ${c.broker_id} · ${cluster}` : cluster;
  } catch (e) {
    notice(`The API does not answer: ${e.message}`, "error");
  }
  window.addEventListener("hashchange", router);
  await router();
}

document.addEventListener("DOMContentLoaded", start);

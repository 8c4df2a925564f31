// The Schemas page of Odradek's console: subjects, their versions, a diff between two
// versions and the compatibility levels, read from the schema registry through the
// console's read-only /v1/schemas/ route (docs/console.md). It uses console.js's helpers
// (h, api, table, card) and adds its routes to console.js's ROUTES.
"use strict";

const SCHEMAS_API = "/v1/schemas";

function registry(path) { return api(`${SCHEMAS_API}/${path}`); }

// A schema's text as lines worth comparing: JSON (Avro, JSON Schema) indented, .proto as is.
function schemaLines(text) {
  try { return JSON.stringify(JSON.parse(text), null, 2).split("\n"); } catch (e) { return text.split("\n"); }
}

// A line diff (longest common subsequence): [{op: " " | "-" | "+", line}] from ``a`` to ``b``.
function lineDiff(a, b) {
  const n = a.length, m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push({ op: " ", line: a[i] }); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) { out.push({ op: "-", line: a[i] }); i++; }
    else { out.push({ op: "+", line: b[j] }); j++; }
  }
  while (i < n) out.push({ op: "-", line: a[i++] });
  while (j < m) out.push({ op: "+", line: b[j++] });
  return out;
}

function diffView(rows) {
  const kinds = { " ": "same", "-": "removed", "+": "added" };
  return h("pre", { class: "diff payload", testid: "schema-diff" },
    rows.map((r) => h("div", { class: `diff-${kinds[r.op]}`, testid: `diff-${kinds[r.op]}` }, `${r.op} ${r.line}`)));
}

// A subject's level; ``own`` false when it follows the global one (the console's route answers
// null for a subject without a level of its own, where the registry answers 404/40408).
async function levelOf(subject, global) {
  const own = await registry(`config/${enc(subject)}`);
  if (own.compatibilityLevel) return { level: own.compatibilityLevel, own: true };
  return { level: (global || await registry("config")).compatibilityLevel, own: false };
}

async function schemasPage(page) {
  const holder = h("div");
  const refresh = async () => {
    const [subjects, global] = await Promise.all([registry("subjects"), registry("config")]);
    const rows = await Promise.all(subjects.slice(0, 500).map(async (subject) => {
      const [latest, level] = await Promise.all([registry(`subjects/${enc(subject)}/versions/latest`), levelOf(subject, global)]);
      return { subject, version: latest.version, id: latest.id, type: latest.schemaType || "AVRO", level };
    }));
    holder.replaceChildren(h("div", {},
      h("div", { class: "cards" },
        card("Subjects", fmtInt(subjects.length), "schemas-subject-count"),
        card("Global compatibility", global.compatibilityLevel, "schemas-global-level")),
      table([
        { label: "Subject", key: "subject", render: (r) => h("a", { href: `#/schemas/${enc(r.subject)}`, testid: "subject-link" }, r.subject) },
        { label: "Latest version", key: "version", numeric: true },
        { label: "Schema id", key: "id", numeric: true },
        { label: "Type", key: "type" },
        { label: "Compatibility", key: "level", sortValue: (r) => r.level.level,
          render: (r) => r.level.own ? r.level.level : h("span", { class: "muted" }, `${r.level.level} (global)`) },
      ], rows, { testid: "subjects-table", rowTestid: "subject-row", sortable: true, empty: "No subjects registered yet." }),
      subjects.length > 500 ? h("p", { class: "muted" }, `The first 500 of ${fmtInt(subjects.length)} subjects.`) : null,
    ));
  };
  await refresh();
  page.replaceChildren(h("h1", {}, "Schemas"), holder);
  return refresh;
}

async function subjectPage(page, subject) {
  const versions = await registry(`subjects/${enc(subject)}/versions`);
  const all = await Promise.all(versions.map((v) => registry(`subjects/${enc(subject)}/versions/${v}`)));
  const level = await levelOf(subject);
  const pick = (testid, selected) => h("select", { testid },
    all.map((sv) => h("option", { value: String(sv.version), selected: sv.version === selected }, `version ${sv.version} (id ${sv.id})`)));
  const newest = all[all.length - 1];
  const from = pick("diff-from", all.length > 1 ? all[all.length - 2].version : newest.version);
  const to = pick("diff-to", newest.version);
  const diffHolder = h("div");
  const schemaHolder = h("div");
  const byVersion = (v) => all.find((sv) => String(sv.version) === String(v));
  function drawDiff() {
    const a = byVersion(from.value), b = byVersion(to.value);
    const rows = lineDiff(schemaLines(a.schema), schemaLines(b.schema));
    const changed = rows.filter((r) => r.op !== " ").length;
    diffHolder.replaceChildren(
      h("p", { class: "muted", testid: "diff-summary" },
        changed ? `${changed} line(s) differ between version ${a.version} and version ${b.version}.` : `Versions ${a.version} and ${b.version} are the same.`),
      diffView(rows));
  }
  function showSchema(sv) {
    const refs = sv.references || [];
    schemaHolder.replaceChildren(h("div", {},
      h("h2", {}, `Version ${sv.version}`),
      refs.length ? h("p", { testid: "schema-references" }, "References: ", refs.map((r) => `${r.name} → ${r.subject} v${r.version}`).join(", ")) : null,
      h("pre", { class: "payload panel", testid: "schema-text" }, schemaLines(sv.schema).join("\n"))));
  }
  from.addEventListener("change", drawDiff);
  to.addEventListener("change", drawDiff);
  drawDiff();
  showSchema(newest);
  page.replaceChildren(
    h("h1", {}, h("a", { href: "#/schemas" }, "Schemas"), " / ", subject),
    h("div", { class: "cards" },
      card("Versions", fmtInt(all.length), "subject-version-count"),
      card(level.own ? "Compatibility (this subject)" : "Compatibility (global)", level.level, "subject-level"),
      card("Type", newest.schemaType || "AVRO", "subject-type")),
    h("h2", {}, "Versions"),
    table([
      { label: "Version", key: "version", numeric: true,
        render: (sv) => h("button", { type: "button", class: "link", onclick: () => showSchema(sv), testid: "version-link" }, String(sv.version)) },
      { label: "Schema id", key: "id", numeric: true },
      { label: "Type", key: "schemaType", render: (sv) => sv.schemaType || "AVRO" },
      { label: "References", key: "references", render: (sv) => (sv.references || []).map((r) => `${r.subject} v${r.version}`).join(", ") || "—" },
    ], all, { testid: "versions-table", rowTestid: "version-row" }),
    h("h2", {}, "Diff"),
    h("div", { class: "controls" }, h("label", { class: "inline" }, "From ", from), " ", h("label", { class: "inline" }, "to ", to)),
    diffHolder,
    schemaHolder,
  );
  return async () => {}; // versions change rarely: no live refresh (reload the page to see new ones)
}

ROUTES.push(
  [/^#\/schemas$/, "schemas", schemasPage],
  [/^#\/schemas\/(.+)$/, "schemas", subjectPage],
);

// The live view: one EventSource; every `snapshot` replaces the state, deltas merge into it
// (reconciles by id, objects by kind/namespace/name), then the page is drawn again.
"use strict";

const state = { controller: null, reconciles: new Map(), objects: new Map() };
const MAX_RECONCILES = 5000;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "onclick") node.onclick = value;
    else if (value !== undefined && value !== null) node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const meta = (o) => o.object.metadata || {};
const objectKey = (seen) => `${seen.kind}/${meta(seen).namespace || ""}/${meta(seen).name}`;
const primaryKey = (seen) => (meta(seen).namespace ? `${meta(seen).namespace}/` : "") + meta(seen).name;

function triggerText(t) {
  switch (t.type) {
    case "owned": return `owned ${t.kind} ${t.name}`;
    case "watched": return `watched ${t.kind} ${t.name}`;
    case "backoff": return `backoff retry ${t.attempt}`;
    default: return t.type;
  }
}

function writeText(w) {
  const kind = w.kind.toLowerCase();
  const name = w.object.split("/").pop();
  const verbs = { created: "created", replaced: "replaced", patched: "patched", deleted: "deleted" };
  return w.verb === "patchedStatus" ? `patched status of ${kind} ${name}` : `${verbs[w.verb]} ${kind} ${name}`;
}

function outcomeNode(r) {
  const o = r.outcome;
  if (!o) return el("span", { class: "muted" }, "running…");
  if (o.type === "ok") return el("span", {}, "ok");
  if (o.type === "requeue") return el("span", {}, `requeue in ${(o.afterMs / 1000).toFixed(1)} s`);
  return el("span", { class: "error" }, `error: ${o.message} — retry ${o.attempt} in ${(o.retryAfterMs / 1000).toFixed(2)} s`);
}

async function act(path, body) {
  const response = await fetch(`/ui/api/${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Steady-UI": "1" },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  if (!response.ok) {
    const text = await response.text();
    alert(`${path}: ${response.status} ${text}`);
  }
}

function controllerPanel() {
  const view = state.controller;
  const panel = document.getElementById("controller");
  panel.replaceChildren();
  if (!view) return;
  const s = view.state;
  const running = s.running ? el("span", { class: "badge ok", id: "controller-running" }, "running")
                            : el("span", { class: "badge bad", id: "controller-running" }, "stopped");
  const leader = s.leader === null ? "no election" : s.leader ? "leader" : "follower";
  const switchButton = view.wanted === null ? null
    : el("button", { id: "controller-toggle", onclick: () => act("controller", { running: !view.wanted }) },
         view.wanted ? "Stop controller" : "Start controller");
  const backoff = Object.entries(s.backoff || {}).map(([key, retry]) =>
    el("div", { class: "backoff" }, `${key}: retry ${retry.attempt} at ${new Date(retry.at).toLocaleTimeString()}`));
  const watches = (s.kinds || []).map((k) =>
    el("div", { class: "watch", "data-kind": k.kind }, `${k.kind} (${k.role}): ${k.phase}`));
  panel.append(
    el("div", { class: "controller-row" },
      el("strong", {}, `controller ${s.name || "?"}`), running, switchButton,
      el("span", {}, leader), el("span", {}, s.synced ? "caches synced" : "syncing caches"),
      el("span", { id: "queue-depth" }, `queue ${s.queueDepth}`),
      el("span", { id: "in-flight" }, `in flight ${s.inFlight}`)),
    el("div", { class: "controller-row" },
      el("div", {}, el("h4", {}, "watches"), ...watches),
      el("div", {}, el("h4", {}, "keys in backoff"), backoff.length ? backoff : el("div", { class: "muted" }, "none"))),
  );
}

function ownedTable(primary, all) {
  const uid = meta(primary).uid;
  const owned = all.filter((o) => o.role !== "primary" &&
    (meta(o).ownerReferences || []).some((r) => r.controller && r.uid === uid));
  owned.sort((a, b) => objectKey(a).localeCompare(objectKey(b)));
  const rows = owned.map((o) => {
    const status = o.object.status || {};
    const ready = (status.conditions || []).find((c) => c.type === "Ready");
    const terminating = meta(o).deletionTimestamp ? " (terminating)" : "";
    return el("tr", { class: "owned", "data-kind": o.kind, "data-name": meta(o).name },
      el("td", {}, o.kind), el("td", { class: "owned-name" }, meta(o).name),
      el("td", {}, (status.phase || "") + terminating), el("td", {}, ready ? `Ready=${ready.status}` : ""),
      el("td", {}, el("button", { class: "delete",
        onclick: () => act("delete", { kind: o.kind, namespace: meta(o).namespace || "", name: meta(o).name }) },
        "delete")));
  });
  return el("table", { class: "owned-objects" },
    el("tr", {}, el("th", {}, "kind"), el("th", {}, "name"), el("th", {}, "phase"), el("th", {}, "ready"), el("th", {})),
    rows);
}

function timeline(key) {
  const records = [...state.reconciles.values()].filter((r) => r.key === key).sort((a, b) => b.id - a.id);
  const rows = records.map((r) => el("tr", { class: "reconcile", "data-id": r.id },
    el("td", {}, new Date(r.startedAt).toLocaleTimeString()),
    el("td", {}, r.durationMs === null ? "" : `${r.durationMs.toFixed(1)} ms`),
    el("td", { class: "triggers" }, r.triggers.map((t) => el("span", { class: "trigger" }, triggerText(t)))),
    el("td", { class: "writes" }, !r.outcome ? "" : r.writes.length
      ? r.writes.map((w) => el("span", { class: "write" }, writeText(w)))
      : el("span", { class: "nochange" }, "no change")),
    el("td", { class: "outcome" }, outcomeNode(r))));
  return el("table", { class: "timeline" },
    el("tr", {}, el("th", {}, "start"), el("th", {}, "took"), el("th", {}, "triggers"), el("th", {}, "wrote"), el("th", {}, "outcome")),
    rows);
}

function primaryCard(primary, all) {
  const o = primary.object;
  const key = primaryKey(primary);
  const conditions = ((o.status || {}).conditions || []).map((c) =>
    el("tr", {}, el("td", {}, c.type), el("td", {}, c.status), el("td", {}, c.reason || ""), el("td", {}, c.message || "")));
  const replicas = o.spec && typeof o.spec.replicas === "number";
  const input = el("input", { type: "number", min: "0", value: replicas ? o.spec.replicas : "", class: "replicas-input" });
  const scale = replicas ? el("span", {}, " replicas ", input,
    el("button", { class: "set-replicas", onclick: () =>
      act("replicas", { namespace: meta(primary).namespace || "", name: meta(primary).name, replicas: Number(input.value) }) }, "set")) : null;
  return el("section", { class: "primary", "data-key": key },
    el("h2", {}, `${primary.kind} ${key}`, scale),
    el("div", { class: "columns" },
      el("div", {}, el("h3", {}, "spec (desired)"), el("pre", { class: "spec" }, JSON.stringify(o.spec || {}, null, 2))),
      el("div", {}, el("h3", {}, "status (actual)"), el("pre", { class: "status" }, JSON.stringify(o.status || {}, null, 2)))),
    conditions.length ? el("table", { class: "conditions" }, el("tr", {}, el("th", {}, "condition"), el("th", {}, "status"), el("th", {}, "reason"), el("th", {}, "message")), conditions) : null,
    el("h3", {}, "owns"), ownedTable(primary, all),
    el("h3", {}, "reconciles"), timeline(key));
}

let drawPending = false;
function draw() {
  if (drawPending) return;
  drawPending = true;
  requestAnimationFrame(() => {
    drawPending = false;
    // Keep a value being typed into a replicas box.
    const focused = document.activeElement;
    if (focused && focused.classList && focused.classList.contains("replicas-input")) return;
    controllerPanel();
    const all = [...state.objects.values()];
    const primaries = all.filter((o) => o.role === "primary").sort((a, b) => objectKey(a).localeCompare(objectKey(b)));
    const main = document.getElementById("objects");
    main.replaceChildren(...(primaries.length ? primaries.map((p) => primaryCard(p, all))
      : [el("p", { class: "panel muted" }, "no primary objects yet")]));
  });
}

function connect() {
  const badge = document.getElementById("connection");
  const source = new EventSource("/ui/api/events");
  source.addEventListener("snapshot", (e) => {
    const snapshot = JSON.parse(e.data);
    state.controller = snapshot.controller;
    state.reconciles = new Map(snapshot.reconciles.map((r) => [r.id, r]));
    state.objects = new Map(snapshot.objects.map((o) => [objectKey(o), o]));
    badge.textContent = "live"; badge.className = "badge ok";
    draw();
  });
  source.addEventListener("reconcile", (e) => {
    const observed = JSON.parse(e.data);
    const existing = state.reconciles.get(observed.record.id);
    // A start delivered after its finish (snapshot overlap) must not undo it.
    if (!(existing && existing.outcome && !observed.record.outcome)) state.reconciles.set(observed.record.id, observed.record);
    // Keep the page bounded like the server's history (Map iterates in insertion order).
    for (const id of state.reconciles.keys()) {
      if (state.reconciles.size <= MAX_RECONCILES) break;
      state.reconciles.delete(id);
    }
    draw();
  });
  source.addEventListener("object", (e) => {
    const change = JSON.parse(e.data);
    const seen = { role: change.role, kind: change.kind, object: change.object };
    if (change.op === "delete") state.objects.delete(objectKey(seen)); else state.objects.set(objectKey(seen), seen);
    draw();
  });
  source.addEventListener("controller", (e) => { state.controller = JSON.parse(e.data); draw(); });
  source.onerror = () => { badge.textContent = "reconnecting…"; badge.className = "badge warn"; };
}

connect();

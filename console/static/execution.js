// One execution: its state as a tree, its revisions (newest first, each patch as a diff against the state
// before it), time travel to the state at any revision, the agents seen and the observation stream. New
// revisions arrive over an event stream fed by Watch; the page keeps the head state by merging each
// revision's applied patch into it, as the server does, so a new revision costs no state read.

import { api, errorBox, follow, h, header, liveBadge, pathName, query, showJSON, showTime } from "./dom.js";
import { changedPaths, mergePatch, patchDiff } from "./patch.js";
import { StateTree } from "./tree.js";

const PAGE = 50; // revisions loaded at a time
const KEPT = 1000; // revisions the timeline shows at most; older ones drop off (and can be loaded again)
const OBSERVATIONS_KEPT = 200;

header("executions");
const id = pathName();
const base = `/api/executions/${encodeURIComponent(id)}`;
const page = document.getElementById("page");

const model = {
  head: 0,
  compact: 0,
  headState: undefined, // the state at `head`, kept by merging patches
  oldest: 0, // the oldest revision in the timeline
  viewing: null, // the revision shown by time travel; null: the head, live
  lines: new Map(), // revision -> its diff lines, for the revisions in the timeline
  agents: new Set(),
  agentCount: 0,
};

const [badge, setStatus] = liveBadge();
const facts = h("dl", { class: "facts", id: "facts" });
const agents = h("div", { class: "agents", id: "agents" });
const stateTitle = h("span", { class: "meta", id: "state-title" });
const travelInput = h("input", { type: "number", min: 0, id: "travel", "aria-label": "revision", placeholder: "revision" });
const liveButton = h("button", { type: "button", id: "live", hidden: true, onclick: () => showHead() }, "back to live");
const stateProblem = h("div");
const treeBox = h("div", { class: "tree", id: "state" });
const tree = new StateTree(treeBox);
const timeline = h("ol", { class: "timeline", id: "revisions" });
const olderButton = h("button", { type: "button", id: "older", hidden: true, onclick: () => loadOlder() }, "older revisions");
const [observationBadge, setObservationStatus] = liveBadge();
const agentInput = h("input", { name: "agent", placeholder: "agent", "aria-label": "agent" });
const skillsInput = h("input", { name: "skills", placeholder: "skills, comma-separated", "aria-label": "skills" });
const readingNote = h("p", { class: "meta", id: "reading" });
const observations = h("ol", { class: "observations", id: "observations" });

page.append(
  h("div", { class: "title" }, h("h1", {}, id), badge),
  facts,
  agents,
  h(
    "div",
    { class: "columns" },
    h(
      "section",
      { class: "panel" },
      h("h2", {}, "State ", stateTitle),
      h(
        "form",
        { class: "controls", onsubmit: (e) => (e.preventDefault(), travelTo(travelInput.value === "" ? NaN : Number(travelInput.value))) },
        h("label", { for: "travel" }, "time travel to revision"),
        travelInput,
        h("button", { type: "submit" }, "show"),
        liveButton,
      ),
      stateProblem,
      treeBox,
    ),
    h("section", { class: "panel" }, h("h2", {}, "Revisions"), timeline, olderButton),
    h(
      "section",
      { class: "panel observations-panel" },
      h("div", { class: "title" }, h("h2", {}, "Observations"), observationBadge),
      h(
        "form",
        { class: "controls", onsubmit: (e) => (e.preventDefault(), readObservations()) },
        h("label", {}, "read as"),
        agentInput,
        skillsInput,
        h("button", { type: "submit" }, "read"),
      ),
      readingNote,
      observations,
    ),
  ),
);

async function start() {
  let summary;
  try {
    summary = await api(base);
    model.head = summary.head_revision;
    model.compact = summary.compact_revision;
    model.agentCount = summary.agent_count;
    summary.agents.forEach((a) => model.agents.add(a));
    const first = Math.max(model.compact + 1, model.head - PAGE + 1);
    const loaded = await load(first, model.head);
    model.headState = loaded.state;
    model.oldest = first;
    for (const item of loaded.items.reverse()) timeline.append(card(item.event, item.lines));
    olderButton.hidden = first <= model.compact + 1;
  } catch (error) {
    page.replaceChildren(errorBox(error));
    return;
  }
  drawFacts(summary);
  showHead();
  follow(`${base}/events${query({ from: model.head })}`, { revision: onRevision, snapshot: onSnapshot }, setStatus);
  readObservations();
}

// Revisions from..to with their diffs, and the state after them: the state at from-1 with each patch merged.
async function load(from, to) {
  let state = (await api(`${base}/state?at=${from - 1}`)).state;
  const items = [];
  let token = "";
  while (from <= to) {
    const got = await api(`${base}/history${query({ from, to, page_size: PAGE, page_token: token })}`);
    for (const event of got.revisions) {
      const lines = patchDiff(state, event.applied_patch);
      state = mergePatch(state, event.applied_patch);
      items.push({ event, lines });
    }
    token = got.next_page_token;
    if (!token) break;
  }
  return { state, items };
}

async function loadOlder() {
  const to = model.oldest - 1;
  const from = Math.max(model.compact + 1, to - PAGE + 1);
  olderButton.disabled = true;
  try {
    const loaded = await load(from, to);
    for (const item of loaded.items.reverse()) timeline.append(card(item.event, item.lines));
    model.oldest = from;
    olderButton.hidden = from <= model.compact + 1;
  } catch (error) {
    olderButton.after(errorBox(error));
  } finally {
    olderButton.disabled = false;
  }
}

function onRevision(event) {
  if (event.revision <= model.head) return;
  let lines;
  if (event.revision === model.head + 1 && model.headState !== undefined) {
    lines = patchDiff(model.headState, event.applied_patch);
    model.headState = mergePatch(model.headState, event.applied_patch);
  } else {
    lines = patchDiff(undefined, event.applied_patch); // a revision missed: the state before it is unknown
    model.headState = undefined;
  }
  model.head = event.revision;
  if (!model.agents.has(event.agent_id)) {
    model.agents.add(event.agent_id);
    model.agentCount += 1;
  }
  timeline.prepend(card(event, lines));
  while (timeline.children.length > KEPT) {
    const dropped = Number(timeline.lastElementChild.dataset.revision);
    model.lines.delete(dropped);
    timeline.lastElementChild.remove();
    model.oldest = dropped + 1;
    olderButton.hidden = false;
  }
  drawFacts({ update_time: event.commit_time });
  if (model.viewing === null) showHead();
  else stateTitle.textContent = `at revision ${model.viewing} of ${model.head} (time travel)`;
}

function onSnapshot(snapshot) {
  model.head = snapshot.revision;
  model.compact = snapshot.compact_revision;
  model.headState = snapshot.state;
  timeline.prepend(h("li", { class: "note" }, `history compacted up to #${snapshot.compact_revision}; state as of #${snapshot.revision}`));
  drawFacts({});
  if (model.viewing === null) showHead();
}

async function showHead() {
  model.viewing = null;
  liveButton.hidden = true;
  selectCard(null);
  stateProblem.replaceChildren();
  if (model.headState === undefined) {
    const at = model.head; // a revision was missed: read the state at head instead of merging into it
    try {
      const read = await api(`${base}/state${query({ at })}`);
      if (model.head !== at || model.viewing !== null) return; // a newer revision or time travel came first
      model.headState = read.state;
    } catch (error) {
      stateProblem.replaceChildren(errorBox(error));
      return;
    }
  }
  stateTitle.textContent = `at revision ${model.head} (head, live)`;
  tree.show(model.headState, changedPaths(model.lines.get(model.head) || []));
}

async function travelTo(revision) {
  if (!Number.isInteger(revision)) return;
  model.viewing = revision;
  liveButton.hidden = false;
  selectCard(revision);
  stateProblem.replaceChildren();
  try {
    const read = await api(`${base}/state${query({ at: revision })}`);
    if (model.viewing !== revision) return; // the reader moved on meanwhile
    stateTitle.textContent = `at revision ${revision} of ${model.head} (time travel)`;
    tree.show(read.state, changedPaths(model.lines.get(revision) || []));
  } catch (error) {
    if (model.viewing === revision) stateProblem.replaceChildren(errorBox(error));
  }
}

function selectCard(revision) {
  for (const li of timeline.querySelectorAll(".selected")) li.classList.remove("selected");
  if (revision !== null) document.getElementById(`r${revision}`)?.classList.add("selected");
}

function card(event, lines) {
  model.lines.set(event.revision, lines);
  return h(
    "li",
    { class: "revision", id: `r${event.revision}`, "data-revision": event.revision },
    h(
      "div",
      { class: "line" },
      h("button", { type: "button", class: "rev", title: "show the state at this revision", onclick: () => travelTo(event.revision) }, `#${event.revision}`),
      h("span", { class: "chip agent" }, event.agent_id),
      h("span", { class: "meta" }, `base #${event.base_revision}`),
      h("time", { datetime: event.commit_time }, showTime(event.commit_time)),
    ),
    event.action === null ? "" : h("div", { class: "action" }, h("span", { class: "meta" }, "action "), h("code", {}, showJSON(event.action))),
    event.resolutions.length
      ? h("ul", { class: "resolutions" }, event.resolutions.map((r) => h("li", {}, h("code", {}, r.path), ` ${r.policy} → ${r.outcome}`)))
      : "",
    diff(lines),
  );
}

const DIFF_LINES = 40;

function diff(lines) {
  const rows = [];
  for (const line of lines.slice(0, DIFF_LINES)) {
    if ("old" in line) rows.push(h("div", { class: "del" }, `- ${line.path}: ${showJSON(line.old, 160)}`));
    else if (line.op === "remove") rows.push(h("div", { class: "del" }, `- ${line.path}`));
    if ("value" in line) rows.push(h("div", { class: "add" }, `+ ${line.path}: ${showJSON(line.value, 160)}`));
  }
  if (lines.length > DIFF_LINES) rows.push(h("div", { class: "meta" }, `… ${lines.length - DIFF_LINES} more changes`));
  if (!lines.length) rows.push(h("div", { class: "meta" }, "no change"));
  return h("div", { class: "diff" }, rows);
}

function drawFacts(summary) {
  if (summary.create_time) model.created = summary.create_time;
  if (summary.update_time) model.updated = summary.update_time;
  const fact = (name, value) => [h("dt", {}, name), h("dd", {}, value)];
  facts.replaceChildren(
    ...fact("head revision", String(model.head)),
    ...(model.compact ? fact("compacted up to", `#${model.compact}`) : []),
    ...fact("created", showTime(model.created)),
    ...fact("last revision", showTime(model.updated)),
  );
  agents.replaceChildren(
    h("span", { class: "meta" }, `agents seen (${model.agentCount}) `),
    ...[...model.agents].sort().map((a) => h("span", { class: "chip agent" }, a)),
  );
}

let observationSource = null;

function readObservations() {
  observationSource?.close();
  observations.replaceChildren();
  const params = { agent: agentInput.value.trim(), skills: skillsInput.value.trim() };
  observationSource = follow(
    `${base}/observations${query(params)}`,
    {
      reading: (r) => {
        agentInput.value = r.agent;
        skillsInput.value = r.skills.join(", ");
        const skills = r.skills.length === 1 ? "1 skill" : `${r.skills.length} skills`;
        readingNote.textContent = `what is sent to everyone (*), to ${r.agent ? `agent ${r.agent}` : "the token's agent"} and to ${skills}, from #${r.after + 1} on; reading takes nothing from agents' consumer groups`;
        readingNote.title = r.skills.map((s) => `skill:${s}`).join(", ");
      },
      observation: (o) => {
        observations.prepend(
          h(
            "li",
            { class: "observation", "data-sequence": o.sequence },
            h("div", { class: "line" }, h("b", {}, `#${o.sequence}`), " → ", h("span", { class: "chip" }, o.to), o.kind ? ` ${o.kind}` : "", o.source ? h("span", { class: "meta" }, ` from ${o.source}`) : "", h("time", {}, showTime(o.publish_time))),
            h("code", {}, showJSON(o.payload, 400)),
          ),
        );
        while (observations.children.length > OBSERVATIONS_KEPT) observations.lastElementChild.remove();
      },
    },
    setObservationStatus,
  );
}

start();

// One skill: its section graph drawn (roles, edges by kind, macros), and the section picked in it.

import { api, errorBox, h, header, pathName, showTime } from "./dom.js";
import { EDGE_KINDS, drawGraph } from "./graph.js";

header("skills");
const name = pathName();
const page = document.getElementById("page");

async function start() {
  let skill;
  try {
    skill = await api(`/api/skills/${encodeURIComponent(name)}${location.search}`);
  } catch (error) {
    page.replaceChildren(h("h1", {}, name), errorBox(error));
    return;
  }
  const summary = skill.summary;
  const details = h("aside", { class: "panel section-details", id: "section" }, h("p", { class: "meta" }, "Pick a section in the graph."));
  const graph = drawGraph(skill, (index) => {
    graph.select(index);
    details.replaceChildren(...section(skill.sections.find((x) => x.index === index), skill));
  });
  const roles = [...new Set(skill.sections.map((x) => x.role))].sort();
  const kinds = EDGE_KINDS.filter((kind) => skill.edges.some((e) => e.kind === kind));
  const toggle = (kind) => h("label", { class: `kind k-${kind}` }, h("input", { type: "checkbox", checked: true, onchange: (e) => graph.svg.classList.toggle(`hide-${kind}`, !e.target.checked) }), ` ${kind}`);
  page.append(
    h("div", { class: "title" }, h("h1", {}, summary.name), h("span", { class: "chip" }, `version ${summary.version}`)),
    h("p", { class: "description" }, summary.description),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "sections"),
      h("dd", {}, String(summary.section_count)),
      h("dt", {}, "edges"),
      h("dd", {}, String(skill.edges.length)),
      h("dt", {}, "tokens"),
      h("dd", {}, String(summary.token_count)),
      h("dt", {}, "macros"),
      h("dd", {}, String(skill.macros.length)),
      h("dt", {}, "registered"),
      h("dd", {}, showTime(summary.registered_at)),
    ),
    skill.warnings.length
      ? h("details", { class: "warnings" }, h("summary", {}, `${skill.warnings.length} warnings from loading`), h("ul", {}, skill.warnings.map((w) => h("li", {}, `${w.file}${w.line ? `:${w.line}` : ""}: ${w.rule}: ${w.message}`))))
      : "",
    h(
      "div",
      { class: "legend" },
      h("span", { class: "meta" }, "roles "),
      roles.map((role) => h("span", { class: `role role-${role}` }, role)),
      h("span", { class: "meta" }, " · edges "),
      kinds.map(toggle),
      h("span", { class: "meta" }, " · forward edges on the right, backward on the left"),
    ),
    graph.drawn < graph.total ? h("p", { class: "meta" }, `${graph.drawn} of ${graph.total} edges drawn.`) : "",
    h("div", { class: "graph-layout" }, h("div", { class: "graph-box" }, graph.svg), details),
  );
}

function section(x, skill) {
  const list = (label, items) => (items.length ? [h("dt", {}, label), h("dd", {}, items.join(", "))] : []);
  const named = (pairs) => pairs.map((p) => `${p.name} (${p.kind})`);
  const edges = skill.edges.filter((e) => e.source === x.index || e.target === x.index);
  return [
    h("h2", {}, `#${x.index} ${x.title}`),
    h("p", {}, h("span", { class: `role role-${x.role}` }, x.role), x.is_step ? " step" : "", x.state_changing ? " · changes state" : "", h("span", { class: "meta" }, ` · ${x.file}:${x.first_line}–${x.last_line} · ${x.token_count} tokens`)),
    h("dl", { class: "contract" }, list("inputs", named(x.inputs)), list("outputs", named(x.outputs)), list("resources", x.resources), list("guards", x.guards), list("verifies", x.verifies)),
    edges.length ? h("ul", { class: "edge-list" }, edges.map((e) => h("li", {}, h("span", { class: `kind k-${e.kind}` }, e.kind), ` #${e.source} → #${e.target}${e.label ? ` (${e.label})` : ""}`))) : "",
    h("pre", { class: "section-text" }, x.text),
  ];
}

start();

// A skill's section graph as SVG, laid out as an arc diagram: sections top to bottom in document order
// (a skill is read in that order, and a macro holds a run of consecutive sections, so it is one box),
// edges as arcs, forward ones (to a later section) on the right and backward ones on the left, each arc
// as wide as the square root of the distance it spans, so that near edges stay near the nodes.

import { s } from "./dom.js";

export const EDGE_KINDS = ["order", "data", "requires", "verifies", "handles", "produces", "uses"];
const MAX_EDGES = 3000; // edges drawn at most (a 500-section skill can have tens of thousands)
const NODE_W = 320;
const NODE_H = 26;
const GAP = 8;
const MACRO_HEAD = 18; // room above a macro's first section for its label
const MAX_ARC = 170;
const TITLE_CHARS = 40;

function arcWidth(span, kind) {
  return Math.min(MAX_ARC, 18 + 16 * Math.sqrt(span)) + 3 * Math.max(0, EDGE_KINDS.indexOf(kind));
}

// {svg, select(index), drawn, total}: `onSelect(index)` is called when a section is clicked.
export function drawGraph(skill, onSelect) {
  const sections = skill.sections;
  const starts = new Map(skill.macros.map((m) => [m.first_index, m]));
  const ends = new Set(skill.macros.map((m) => m.first_index + m.section_count - 1));
  const y = [];
  let at = 12;
  for (const section of sections) {
    if (starts.has(section.index)) at += MACRO_HEAD;
    y[section.index] = at;
    at += NODE_H + GAP + (ends.has(section.index) ? GAP : 0);
  }
  const edges = skill.edges.filter((e) => e.source !== e.target && y[e.source] !== undefined && y[e.target] !== undefined);
  const drawn = edges.slice(0, MAX_EDGES);
  const reach = (forward) =>
    Math.max(0, ...drawn.filter((e) => e.target > e.source === forward).map((e) => arcWidth(Math.abs(e.target - e.source), e.kind)));
  const left = reach(false) + 16;
  const right = left + NODE_W;
  const width = right + reach(true) + 16;
  const height = at + 12;
  const mid = (index) => y[index] + NODE_H / 2;
  const markers = EDGE_KINDS.map((kind) =>
    s("marker", { id: `arrow-${kind}`, viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 8, markerHeight: 8, markerUnits: "userSpaceOnUse", orient: "auto" }, s("path", { d: "M0,0 L8,4 L0,8 z", class: `arrow k-${kind}` })),
  );
  const macroBoxes = skill.macros.map((m) => {
    const top = y[m.first_index] - MACRO_HEAD + 2;
    const bottom = y[m.first_index + m.section_count - 1] + NODE_H + GAP / 2;
    return s(
      "g",
      { class: "macro" },
      s("rect", { x: left - 8, y: top, width: NODE_W + 16, height: bottom - top, rx: 6 }),
      s("text", { x: left - 2, y: top + 12, class: "macro-label" }, `macro ${m.name} · ${m.section_count} sections · shown at ${m.level}`),
    );
  });
  const arcs = drawn.map((e) => {
    const forward = e.target > e.source;
    const x = forward ? right : left;
    const bend = (forward ? 1 : -1) * arcWidth(Math.abs(e.target - e.source), e.kind);
    const d = `M${x},${mid(e.source)} C${x + bend},${mid(e.source)} ${x + bend},${mid(e.target)} ${x},${mid(e.target)}`;
    return s(
      "path",
      { d, class: `edge k-${e.kind}`, "data-source": e.source, "data-target": e.target, "marker-end": `url(#arrow-${e.kind})` },
      s("title", {}, `${e.kind}: #${e.source} → #${e.target}${e.label ? ` (${e.label})` : ""}`),
    );
  });
  const nodes = sections.map((section) => {
    const title = section.title.length > TITLE_CHARS ? `${section.title.slice(0, TITLE_CHARS - 1)}…` : section.title;
    return s(
      "g",
      { class: `node role-${section.role}`, "data-index": section.index, tabindex: 0, role: "button", onclick: () => onSelect(section.index), onkeydown: (ev) => ev.key === "Enter" && onSelect(section.index) },
      s("rect", { x: left, y: y[section.index], width: NODE_W, height: NODE_H, rx: 4 }),
      s("rect", { x: left, y: y[section.index], width: 6, height: NODE_H, class: "stripe" }),
      s("text", { x: left + 12, y: y[section.index] + 17, class: "label" }, `#${section.index} ${title}`),
      s("text", { x: right - 8, y: y[section.index] + 17, class: "role-label", "text-anchor": "end" }, section.role),
      s("title", {}, `#${section.index} ${section.title} (${section.role}, ${section.token_count} tokens)`),
    );
  });
  const svg = s(
    "svg",
    { class: "graph", id: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `section graph of ${skill.summary.name}` },
    s("defs", {}, markers),
    macroBoxes,
    s("g", { class: "edges" }, arcs),
    s("g", { class: "nodes" }, nodes),
  );
  const select = (index) => {
    svg.classList.toggle("focusing", index !== null);
    for (const node of svg.querySelectorAll(".node")) node.classList.toggle("selected", Number(node.dataset.index) === index);
    for (const arc of svg.querySelectorAll(".edge")) {
      arc.classList.toggle("focus", Number(arc.dataset.source) === index || Number(arc.dataset.target) === index);
    }
  };
  return { svg, select, drawn: drawn.length, total: edges.length };
}

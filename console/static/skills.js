// The skill library, and a hydrate box: the context a query gets, its token count and what it covers.

import { api, errorBox, h, header, showTime } from "./dom.js";

header("skills");
const page = document.getElementById("page");
const body = h("tbody");
const note = h("p", { class: "meta" });
const queryInput = h("textarea", { id: "query", rows: 2, placeholder: "a task, in words: ship the customer's order", required: true });
const budgetInput = h("input", { id: "budget", type: "number", min: 1, max: 100000, value: 3000 });
const skillsInput = h("input", { id: "only", placeholder: "all skills (or names, comma-separated)" });
const result = h("div", { id: "hydrated" });

page.append(
  h("h1", {}, "Skills"),
  note,
  h(
    "table",
    { class: "list", id: "skills" },
    h("thead", {}, h("tr", {}, ["Skill", "Version", "Sections", "Tokens", "Registered", "Description"].map((c) => h("th", {}, c)))),
    body,
  ),
  h(
    "section",
    { class: "panel" },
    h("h2", {}, "Hydrate"),
    h("p", { class: "meta" }, "The smallest sufficient, dependency-closed part of the library for a task, within a token budget."),
    h(
      "form",
      { class: "hydrate", id: "hydrate", onsubmit: (e) => (e.preventDefault(), hydrate()) },
      queryInput,
      h("div", { class: "controls" }, h("label", { for: "budget" }, "budget (tokens)"), budgetInput, skillsInput, h("button", { type: "submit" }, "hydrate")),
    ),
    result,
  ),
);

async function list() {
  try {
    const data = await api("/api/skills");
    body.replaceChildren(
      ...data.skills.map((s) =>
        h(
          "tr",
          { "data-name": s.name },
          h("td", {}, h("a", { href: `/skills/${encodeURIComponent(s.name)}` }, s.name)),
          h("td", { class: "num" }, s.version),
          h("td", { class: "num" }, s.section_count),
          h("td", { class: "num" }, s.token_count),
          h("td", {}, showTime(s.registered_at)),
          h("td", { class: "description" }, s.description),
        ),
      ),
    );
    if (!data.skills.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "empty" }, "no skills registered")));
    note.textContent = data.truncated ? `The first ${data.skills.length} skills, by name.` : `${data.skills.length} skills.`;
  } catch (error) {
    note.replaceChildren(errorBox(error));
  }
}

async function hydrate() {
  const skills = skillsInput.value.split(",").map((n) => n.trim()).filter(Boolean);
  result.replaceChildren(h("p", { class: "meta" }, "hydrating…"));
  try {
    const got = await api("/api/hydrate", { query: queryInput.value, budget: Number(budgetInput.value), skills });
    result.replaceChildren(...hydrated(got));
  } catch (error) {
    result.replaceChildren(errorBox(error));
  }
}

function hydrated(got) {
  const c = got.coverage;
  const check = (ok, label) => h("span", { class: ok ? "ok" : "bad" }, `${ok ? "✓" : "✗"} ${label}`);
  const covered = new Set(c.covered);
  const uncoverable = new Set(c.uncoverable);
  return [
    h(
      "p",
      { class: "summary", id: "hydrate-summary" },
      h("b", { id: "tokens" }, `${got.token_count} tokens`),
      ` · covers ${c.covered.length} of ${c.anchors.length} anchors · `,
      check(c.dependencies_closed, "dependencies closed"),
      " · ",
      check(c.verifier_reachable, "verifier reachable"),
      got.whole_skill_fallback ? " · whole skills (nothing fitted the budget)" : "",
    ),
    h(
      "div",
      { class: "anchors" },
      c.anchors.map((a) => h("span", { class: `chip ${covered.has(a) ? "covered" : uncoverable.has(a) ? "uncoverable" : "missed"}`, title: covered.has(a) ? "covered" : uncoverable.has(a) ? "no section mentions it" : "not covered" }, a)),
    ),
    h(
      "details",
      { open: true },
      h("summary", {}, `${got.sections.length} sections from ${got.source_skills.join(", ") || "no skill"}${got.macros.length ? `, ${got.macros.length} macros` : ""}`),
      h("ul", { class: "sections" }, got.sections.map((s) => h("li", {}, h("a", { href: `/skills/${encodeURIComponent(s.skill)}` }, s.skill), ` #${s.index} ${s.title} `, h("span", { class: `role role-${s.role}` }, s.role)))),
      got.macros.length ? h("ul", { class: "macros" }, got.macros.map((m) => h("li", {}, `macro ${m.name} (${m.skill} #${m.first_index}–#${m.first_index + m.section_count - 1}, shown at ${m.level})`))) : "",
    ),
    h("pre", { class: "context", id: "context" }, got.context),
  ];
}

list();

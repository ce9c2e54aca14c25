// The executions list, live: the page of executions the console's token may read, listed again by the
// console every two seconds and redrawn when it changed.

import { follow, h, header, liveBadge, query, showTime } from "./dom.js";

header("executions");
const page = document.getElementById("page");
const [badge, setStatus] = liveBadge();
const filter = h("input", { type: "search", id: "prefix", placeholder: "id prefix", "aria-label": "id prefix" });
const body = h("tbody");
const pager = h("div", { class: "pager" });
const problem = h("div", { class: "problem" });

page.append(
  h("div", { class: "title" }, h("h1", {}, "Executions"), badge),
  h("form", { class: "controls", onsubmit: (e) => e.preventDefault() }, filter),
  problem,
  h(
    "table",
    { class: "list", id: "executions" },
    h("thead", {}, h("tr", {}, ["Execution", "Head", "Agents", "Updated", "Created"].map((c) => h("th", {}, c)))),
    body,
  ),
  pager,
);

let tokens = [""]; // the page tokens of the pages before this one, and this one's
let source = null;

function open() {
  source?.close();
  const token = tokens[tokens.length - 1];
  const url = `/api/live/executions${query({ prefix: filter.value, page_token: token })}`;
  source = follow(url, { page: draw }, (text, state) => {
    setStatus(text, state);
    problem.replaceChildren(state === "failed" ? h("div", { class: "error" }, text) : "");
  });
}

function draw(data) {
  problem.replaceChildren();
  setStatus("live", "live");
  body.replaceChildren(
    ...data.executions.map((e) =>
      h(
        "tr",
        { "data-id": e.execution_id },
        h("td", {}, h("a", { href: `/executions/${encodeURIComponent(e.execution_id)}` }, e.execution_id)),
        h("td", { class: "num" }, e.head_revision),
        h("td", {}, agents(e)),
        h("td", {}, showTime(e.update_time)),
        h("td", {}, showTime(e.create_time)),
      ),
    ),
  );
  if (!data.executions.length) body.append(h("tr", {}, h("td", { colspan: 5, class: "empty" }, "no executions")));
  pager.replaceChildren(
    tokens.length > 1 ? h("button", { type: "button", onclick: () => turn(-1) }, "← previous") : "",
    data.next_page_token ? h("button", { type: "button", onclick: () => turn(1, data.next_page_token) }, "next →") : "",
  );
}

function agents(e) {
  const shown = e.agents.slice(0, 8).map((a) => h("span", { class: "chip" }, a));
  const rest = e.agent_count - shown.length;
  return [shown, rest > 0 ? h("span", { class: "meta" }, ` +${rest}`) : ""];
}

function turn(step, token) {
  if (step > 0) tokens.push(token);
  else tokens.pop();
  open();
}

let typing = null;
filter.addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(() => {
    tokens = [""];
    open();
  }, 250);
});
open();

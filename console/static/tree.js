// The state as a collapsible tree. Objects and arrays are <details> elements whose children are built
// only when first opened, a thousand at a time, so a large state costs only what is looked at. The tree
// remembers which paths are open across redraws (a new revision redraws it).

import { h } from "./dom.js";
import { isObject, pointer } from "./patch.js";

const CHILDREN_AT_ONCE = 1000;
const STRING_SHOWN = 2000;

export class StateTree {
  constructor(container) {
    this.container = container;
    this.open = new Set([""]);
    this.drawn = false;
  }

  // Draw `value`; `changed` holds the pointers the shown revision wrote and their ancestors.
  show(value, changed = new Set()) {
    this.changed = changed;
    if (!this.drawn && isObject(value)) {
      // the first time, open the top level's small objects too
      for (const [key, child] of Object.entries(value)) {
        if (isContainer(child) && size(child) <= 20) this.open.add(pointer("", key));
      }
    }
    this.drawn = true;
    this.container.replaceChildren(this.node("", "state", value));
  }

  node(path, label, value) {
    const mark = this.changed.has(path) ? " changed" : "";
    if (!isContainer(value)) {
      return h("div", { class: `leaf${mark}`, "data-path": path }, h("span", { class: "key" }, label), ": ", leaf(value));
    }
    const count = size(value);
    const noun = Array.isArray(value) ? `[${count} item${count === 1 ? "" : "s"}]` : `{${count} key${count === 1 ? "" : "s"}}`;
    const children = h("div", { class: "children" });
    const details = h(
      "details",
      { class: `branch${mark}`, "data-path": path },
      h("summary", {}, h("span", { class: "key" }, label), " ", h("span", { class: "meta" }, noun)),
      children,
    );
    const entries = Array.isArray(value) ? value.map((item, i) => [String(i), item]) : Object.entries(value);
    let shown = 0;
    let button = null;
    const more = () => {
      button?.remove();
      const next = entries.slice(shown, shown + CHILDREN_AT_ONCE);
      shown += next.length;
      for (const [key, child] of next) children.append(this.node(pointer(path, key), key, child));
      const left = entries.length - shown;
      button = left ? h("button", { class: "more", type: "button", onclick: more }, `show more (${left} left)`) : null;
      if (button) children.append(button);
    };
    details.addEventListener("toggle", () => {
      if (details.open) {
        this.open.add(path);
        if (!shown) more();
      } else {
        this.open.delete(path);
      }
    });
    if (this.open.has(path)) {
      details.open = true;
      more();
    }
    return details;
  }
}

function isContainer(value) {
  return value !== null && typeof value === "object";
}

function size(value) {
  return Array.isArray(value) ? value.length : Object.keys(value).length;
}

function leaf(value) {
  if (value === null) return h("span", { class: "value null" }, "null");
  if (typeof value === "string") {
    const cut = value.length > STRING_SHOWN;
    const text = JSON.stringify(cut ? value.slice(0, STRING_SHOWN) : value);
    return h("span", { class: "value string" }, text, cut ? h("span", { class: "meta" }, ` … ${value.length} characters`) : null);
  }
  const kind = typeof value === "bigint" ? "number" : typeof value;
  return h("span", { class: `value ${kind}` }, String(value));
}

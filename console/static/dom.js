// What every page shares: building elements (text only, never HTML from data), calling the console's API,
// following its event streams, and showing JSON values, times and errors.

const SVG_NS = "http://www.w3.org/2000/svg";

// An element with attributes and children; strings become text nodes, so data is never parsed as HTML.
export function h(tag, attrs = {}, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

// The same for SVG elements.
export function s(tag, attrs = {}, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

function fill(el, attrs, children) {
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

// JSON.parse, keeping integers beyond 2^53 exact (as BigInt): the server allows 64-bit integers in states.
export function parseJSON(text) {
  return JSON.parse(text, (key, value, context) =>
    typeof value === "number" && !Number.isSafeInteger(value) && context && /^-?\d+$/.test(context.source)
      ? BigInt(context.source)
      : value,
  );
}

export class ApiError extends Error {
  constructor(status, message, httpStatus) {
    super(message);
    this.status = status;
    this.httpStatus = httpStatus;
  }
}

// GET (or POST with `body`) the console's API; throws ApiError with the server's status name and message.
export async function api(path, body) {
  const init = { headers: { accept: "application/json" } };
  if (body !== undefined) {
    init.method = "POST";
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError("UNAVAILABLE", "the console cannot be reached", 0);
  }
  const text = await response.text();
  let data = null;
  try {
    data = parseJSON(text);
  } catch {
    // not JSON: reported below if the status says it failed
  }
  if (!response.ok) {
    const error = data && data.error;
    throw new ApiError(error ? error.status : `HTTP ${response.status}`, error ? error.message : text.slice(0, 200));
  }
  return data;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") q.set(name, String(value));
  }
  const text = q.toString();
  return text ? `?${text}` : "";
}

// Statuses after which reconnecting cannot help.
const FINAL = new Set(["NOT_FOUND", "PERMISSION_DENIED", "UNAUTHENTICATED", "INVALID_ARGUMENT", "OUT_OF_RANGE"]);

// Follow an event stream: `handlers` by event name get the parsed data; `status(text, state)` is told
// whether the stream is live, reconnecting or stopped. EventSource reconnects by itself, sending the last
// event id (a revision or a sequence) so that the stream resumes after it.
export function follow(url, handlers, status) {
  const source = new EventSource(url);
  for (const [name, handle] of Object.entries(handlers)) {
    source.addEventListener(name, (event) => handle(parseJSON(event.data), event));
  }
  source.addEventListener("open", () => status("live", "live"));
  source.addEventListener("failure", (event) => {
    const error = parseJSON(event.data).error;
    status(`${error.status}: ${error.message}`, "failed");
    if (FINAL.has(error.status)) source.close();
  });
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED) status("stopped: reload the page to try again", "stopped");
    else status("reconnecting…", "reconnecting");
  });
  return source;
}

// A one-line view of a JSON value, cut after `limit` characters.
export function showJSON(value, limit = 240) {
  const parts = [];
  let length = 0;
  const put = (text) => {
    parts.push(text);
    length += text.length;
    if (length > limit) throw parts;
  };
  const walk = (v) => {
    if (v === null || v === undefined) put("null");
    else if (typeof v === "bigint") put(v.toString());
    else if (typeof v !== "object") put(JSON.stringify(v));
    else if (Array.isArray(v)) {
      put("[");
      v.forEach((item, i) => {
        if (i) put(", ");
        walk(item);
      });
      put("]");
    } else {
      put("{");
      Object.entries(v).forEach(([key, item], i) => {
        put(`${i ? ", " : ""}${JSON.stringify(key)}: `);
        walk(item);
      });
      put("}");
    }
  };
  try {
    walk(value);
  } catch (cut) {
    if (cut !== parts) throw cut;
    return `${parts.join("").slice(0, limit)}…`;
  }
  return parts.join("");
}

// "2026-12-03 19:03:17.519 UTC" (times are shown in UTC, as the server records them).
export function showTime(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : `${date.toISOString().replace("T", " ").slice(0, 23)} UTC`;
}

export function errorBox(error) {
  const status = error instanceof ApiError ? error.status : "ERROR";
  return h("div", { class: "error", role: "alert" }, h("strong", {}, status), " ", error.message);
}

// The header every page shows: where the console is, and which server it reads with what.
export function header(active) {
  const link = (href, label, name) => h("a", { href, class: name === active ? "active" : null }, label);
  const server = h("span", { class: "server" });
  const bar = h(
    "header",
    {},
    h("a", { href: "/", class: "brand" }, "skillstate console"),
    h("nav", {}, link("/", "Executions", "executions"), link("/skills", "Skills", "skills")),
    server,
  );
  document.body.prepend(bar);
  api("/api/info").then(
    (info) => server.append(`server ${info.server} · ${info.token ? "with a token" : "no token"} · read-only`),
    () => server.append("server unknown"),
  );
}

// The last path segment of this page's address, decoded (an execution id or a skill name).
export function pathName() {
  const parts = location.pathname.split("/").filter(Boolean);
  return decodeURIComponent(parts[parts.length - 1] || "");
}

export function liveBadge() {
  const badge = h("span", { class: "badge connecting" }, "connecting…");
  const set = (text, state) => {
    badge.className = `badge ${state}`;
    badge.textContent = text;
  };
  return [badge, set];
}

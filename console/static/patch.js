// Merge patches (RFC 7396), as the server applies them: the state at revision r is the state at r-1 with
// revision r's applied patch merged in. The execution page keeps the head state this way as revisions
// arrive, and shows each revision's patch as a diff against the state before it.

import { showJSON } from "./dom.js";

export function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

export function hasOwn(object, key) {
  return Object.prototype.hasOwnProperty.call(object, key);
}

// Set a key as an own property, whatever its name ("__proto__" included).
function put(object, key, value) {
  Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
}

// The patched value; objects along the patched paths are copied, everything else is shared.
export function mergePatch(target, patch) {
  if (!isObject(patch)) return patch;
  const result = {};
  if (isObject(target)) for (const [key, value] of Object.entries(target)) put(result, key, value);
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else put(result, key, mergePatch(hasOwn(result, key) ? result[key] : undefined, value));
  }
  return result;
}

// A JSON Pointer (RFC 6901) one key deeper.
export function pointer(parent, key) {
  return `${parent}/${String(key).replaceAll("~", "~0").replaceAll("/", "~1")}`;
}

const UNKNOWN = Symbol("unknown");

// The changes a patch makes, one line per value it adds, replaces or removes:
// {op: "add" | "change" | "remove" | "set", path, old?, value?}. Without `before` (undefined: the state
// before is not known) the old values are unknown and every write is a "set".
export function patchDiff(before, patch) {
  const lines = [];
  const walk = (old, change, path) => {
    for (const [key, value] of Object.entries(change)) {
      const at = pointer(path, key);
      const was = old === UNKNOWN ? UNKNOWN : isObject(old) && hasOwn(old, key) ? old[key] : undefined;
      if (value === null) {
        if (was === UNKNOWN) lines.push({ op: "remove", path: at });
        else if (was !== undefined) lines.push({ op: "remove", path: at, old: was });
      } else if (isObject(value) && (isObject(was) || was === UNKNOWN)) {
        walk(was, value, at);
      } else if (Array.isArray(value) && Array.isArray(was)) {
        items(was, value, at);
      } else if (was === UNKNOWN) {
        lines.push({ op: "set", path: at, value: mergePatch(undefined, value) });
      } else {
        const now = mergePatch(undefined, value);
        lines.push(was === undefined ? { op: "add", path: at, value: now } : { op: "change", path: at, old: was, value: now });
      }
    }
  };
  // an array is replaced whole; shown item by item, so that an appended item is one line
  const items = (old, now, path) => {
    const common = Math.min(old.length, now.length);
    for (let i = 0; i < common; i++) {
      if (showJSON(old[i], Infinity) !== showJSON(now[i], Infinity)) {
        lines.push({ op: "change", path: pointer(path, i), old: old[i], value: now[i] });
      }
    }
    for (let i = common; i < now.length; i++) lines.push({ op: "add", path: pointer(path, i), value: now[i] });
    for (let i = common; i < old.length; i++) lines.push({ op: "remove", path: pointer(path, i), old: old[i] });
  };
  if (isObject(patch)) walk(before === undefined ? UNKNOWN : before, patch, "");
  return lines;
}

// The pointers a diff writes and all their ancestors ("" is the root): the state tree marks them.
export function changedPaths(lines) {
  const paths = new Set();
  for (const line of lines) {
    for (let path = line.path; path; path = path.slice(0, path.lastIndexOf("/"))) paths.add(path);
    paths.add("");
  }
  return paths;
}

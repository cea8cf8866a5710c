// rlm's JavaScript prelude, part 2/3 (explore): peek, search, find_relevant and the
// lazy `context_chunks` view, which need no host. They mirror the Python helpers.
"use strict";

const __RLM_PREVIEW_CHARS = 200;
const __RLM_BM25_CHUNK_CHARS = 2000;

function __rlm_kind(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (value instanceof __RLM_Chunks) return "chunks";
  return typeof value;
}

/** `context_chunks`: the context in pieces of at most `size` characters, sliced when
 * asked for, never copied whole. A string is cut every `size` characters; an array (or
 * an object's values) yields each string item's pieces in order and any other item
 * whole. Indexable, has `length` and `slice`, iterable. */
class __RLM_Chunks {
  constructor(context, size) {
    this.size = Math.max(1, size | 0);
    let items;
    if (Array.isArray(context)) items = context;
    else if (context !== null && typeof context === "object") items = Object.values(context);
    else items = context === null || context === undefined ? [] : [context];
    this.items = items;
    this.starts = [];
    let total = 0;
    for (const item of items) {
      this.starts.push(total);
      total += typeof item === "string" ? Math.max(Math.ceil(item.length / this.size), 1) : 1;
    }
    this.length = total;
    return new Proxy(this, {
      get(target, prop, receiver) {
        if (typeof prop === "string" && /^\d+$/.test(prop)) return target.at(Number(prop));
        return Reflect.get(target, prop, receiver);
      },
    });
  }
  at(i) {
    if (i < 0) i += this.length;
    if (i < 0 || i >= this.length) return undefined;
    let lo = 0;
    let hi = this.starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.starts[mid] <= i) lo = mid;
      else hi = mid - 1;
    }
    const item = this.items[lo];
    if (typeof item !== "string") return item;
    const at = (i - this.starts[lo]) * this.size;
    return item.slice(at, at + this.size);
  }
  slice(start = 0, end = this.length) {
    const out = [];
    if (start < 0) start = Math.max(this.length + start, 0);
    if (end < 0) end = this.length + end;
    for (let i = start; i < Math.min(end, this.length); i++) out.push(this.at(i));
    return out;
  }
  *[Symbol.iterator]() {
    for (let i = 0; i < this.length; i++) yield this.at(i);
  }
  toString() {
    return `<context_chunks: ${this.length} chunks of at most ${this.size} chars>`;
  }
  toJSON() {
    return this.toString();
  }
}
globalThis.__RLM_Chunks = __RLM_Chunks;

/** A slice of an array, an object (by key order) or a string. */
globalThis.peek = function peek(value, start = 0, end = 10) {
  if (typeof value === "string" || Array.isArray(value)) return value.slice(start, end);
  if (value instanceof __RLM_Chunks) return value.slice(start, end);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).slice(start, end));
  }
  throw new TypeError(`peek() cannot slice a ${__rlm_kind(value)}`);
};

function __rlm_finder(pattern, regex) {
  if (regex || pattern instanceof RegExp) {
    const source = pattern instanceof RegExp ? pattern.source : String(pattern);
    const flags = pattern instanceof RegExp ? pattern.flags : "";
    const re = new RegExp(source, flags.includes("g") ? flags : flags + "g");
    return (text, at = 0) => {
      re.lastIndex = at;
      const m = re.exec(text);
      return m ? [m.index, m[0]] : null;
    };
  }
  const needle = String(pattern);
  return (text, at = 0) => {
    const found = text.indexOf(needle, at);
    return found === -1 ? null : [found, needle];
  };
}

function __rlm_preview(text, at, length) {
  const begin =
    length < __RLM_PREVIEW_CHARS ? Math.max(at - Math.floor((__RLM_PREVIEW_CHARS - length) / 2), 0) : at;
  return text.slice(begin, begin + __RLM_PREVIEW_CHARS);
}

/** Occurrences of `pattern` (literal and case-sensitive unless `regex` is true or a
 * RegExp is given). In a string: [{offset, line, match, preview}] (lines from 1); in an
 * array: [{index, offset, preview}]; in an object: [{key, offset, preview}] (the first
 * match of each item). Previews are 200 characters around the match. */
globalThis.search = function search(value, pattern, regex = false, max_results = 10) {
  const find = __rlm_finder(pattern, regex);
  const limit = max_results == null || max_results <= 0 ? Infinity : max_results;
  const results = [];
  if (typeof value === "string") {
    let at = 0;
    let line = 1;
    let counted = 0;
    while (results.length < limit) {
      const hit = find(value, at);
      if (hit === null) break;
      const [offset, matched] = hit;
      for (let i = value.indexOf("\n", counted); i !== -1 && i < offset; i = value.indexOf("\n", i + 1)) {
        line++;
      }
      counted = offset;
      results.push({ offset, line, match: matched, preview: __rlm_preview(value, offset, matched.length) });
      at = offset + Math.max(matched.length, 1);
      if (at > value.length) break;
    }
    return results;
  }
  let items;
  let label;
  if (Array.isArray(value) || value instanceof __RLM_Chunks) {
    items = Array.from(value, (item, i) => [i, item]);
    label = "index";
  } else if (value !== null && typeof value === "object") {
    items = Object.entries(value);
    label = "key";
  } else {
    throw new TypeError(`search() cannot search a ${__rlm_kind(value)}`);
  }
  for (const [location, item] of items) {
    const text = __rlm_text(item);
    const hit = find(text);
    if (hit !== null) {
      const [offset, matched] = hit;
      results.push({ [label]: location, offset, preview: __rlm_preview(text, offset, matched.length) });
      if (results.length >= limit) break;
    }
  }
  return results;
};

/** The pieces find_relevant ranks: array items, object values, or ~2000-character
 * pieces of a string (cut at a newline where there is one). */
function* __rlm_documents(value) {
  if (typeof value === "string") {
    let at = 0;
    while (at < value.length) {
      let end = Math.min(at + __RLM_BM25_CHUNK_CHARS, value.length);
      if (end < value.length) {
        const newline = value.lastIndexOf("\n", end - 1);
        if (newline >= at + __RLM_BM25_CHUNK_CHARS / 2) end = newline + 1;
      }
      yield ["offset", at, value.slice(at, end)];
      at = end;
    }
  } else if (Array.isArray(value) || value instanceof __RLM_Chunks) {
    let i = 0;
    for (const item of value) yield ["index", i++, __rlm_text(item)];
  } else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) yield ["key", key, __rlm_text(item)];
  } else {
    throw new TypeError(`find_relevant() cannot rank a ${__rlm_kind(value)}`);
  }
}

/** The `top_k` items most relevant to `query` (BM25 over words): [{index|key|offset,
 * score, item}], best first; items with no query word are left out. */
globalThis.find_relevant = function find_relevant(value, query, top_k = 5) {
  const terms = Array.from(new Set(String(query).toLowerCase().match(/\w+/g) || [])).sort();
  const docs = Array.from(__rlm_documents(value));
  if (terms.length === 0 || docs.length === 0) return [];
  const escaped = terms.map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const word = new RegExp(`\\b(?:${escaped.join("|")})\\b`, "gi");
  const k1 = 1.5;
  const b = 0.75;
  let totalLength = 0;
  const hits = [];
  const documentFrequency = new Map();
  for (const [label, location, text] of docs) {
    totalLength += text.length;
    const counts = new Map();
    for (const found of text.match(word) || []) {
      const key = found.toLowerCase();
      counts.set(key, (counts.get(key) || 0) + 1);
    }
    if (counts.size > 0) {
      hits.push({ label, location, text, counts });
      for (const key of counts.keys()) documentFrequency.set(key, (documentFrequency.get(key) || 0) + 1);
    }
  }
  if (hits.length === 0) return [];
  const average = totalLength / docs.length || 1;
  const scored = hits.map((hit, position) => {
    let score = 0;
    for (const [key, tf] of hit.counts) {
      const df = documentFrequency.get(key);
      const idf = Math.log((docs.length - df + 0.5) / (df + 0.5) + 1);
      score += (idf * tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * hit.text.length) / average));
    }
    return { score, position };
  });
  scored.sort((x, y) => y.score - x.score || x.position - y.position);
  return scored.slice(0, Math.max(top_k | 0, 0)).map(({ score, position }) => {
    const hit = hits[position];
    const item = hit.label === "offset" ? hit.text : Array.isArray(value) ? value[hit.location] : value[hit.location];
    return { [hit.label]: hit.location, score: Math.round(score * 10000) / 10000, item };
  });
};

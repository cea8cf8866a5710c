// rlm's JavaScript prelude, part 2/4 (explore): peek, search, find_relevant and the
// lazy `context_chunks` view, which need no host. They mirror the Python helpers.
// Like the rest of the prelude they read only the private copies of `__rlm_safe` and
// walk lists by index, so model code that replaces a built-in method or the array
// iterator changes none of their results.
"use strict";

const __RLM_PREVIEW_CHARS = 200;
const __RLM_BM25_CHUNK_CHARS = 2000;
/** `Reflect.get` as it was at startup (the chunks view's proxy reads through it). */
const __RLM_REFLECT_GET = Reflect.get;

function __rlm_kind(value) {
  if (value === null) return "null";
  if (__rlm_safe.isArray(value)) return "array";
  if (value instanceof __RLM_Chunks) return "chunks";
  return typeof value;
}

/** True when `prop` is a string of decimal digits (an index of the chunks view). */
function __rlm_is_index(prop) {
  if (typeof prop !== "string" || prop.length === 0) return false;
  for (let i = 0; i < prop.length; i++) {
    if (prop[i] < "0" || prop[i] > "9") return false;
  }
  return true;
}

/** Every match of the global regular expression `re` in `text`, as strings. */
function __rlm_all_matches(re, text) {
  const safe = __rlm_safe;
  const out = [];
  re.lastIndex = 0;
  for (let m = safe.regexExec(re, text); m !== null; m = safe.regexExec(re, text)) {
    safe.append(out, m[0]);
    if (m[0] === "") re.lastIndex += 1;
  }
  return out;
}

/** `context_chunks`: the context in pieces of at most `size` characters, sliced when
 * asked for, never copied whole. A string is cut every `size` characters; an array (or
 * an object's values) yields each string item's pieces in order and any other item
 * whole. Indexable, has `length` and `slice`, iterable. */
class __RLM_Chunks {
  constructor(context, size) {
    const safe = __rlm_safe;
    safe.own(this, "size", safe.math.max(1, size | 0));
    let items;
    if (safe.isArray(context)) items = context;
    else if (context !== null && typeof context === "object") {
      items = safe.map(safe.keys(context), (key) => context[key]);
    } else items = context === null || context === undefined ? [] : [context];
    safe.own(this, "items", items);
    const starts = [];
    let total = 0;
    for (let i = 0; i < items.length; i++) {
      safe.append(starts, total);
      const item = items[i];
      total += typeof item === "string" ? safe.math.max(safe.math.ceil(item.length / this.size), 1) : 1;
    }
    safe.own(this, "starts", starts);
    safe.own(this, "length", total);
    return new Proxy(this, {
      get(target, prop, receiver) {
        if (__rlm_is_index(prop)) return target.at(+prop);
        return __RLM_REFLECT_GET(target, prop, receiver);
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
    return __rlm_safe.slice(item, at, at + this.size);
  }
  slice(start = 0, end = this.length) {
    const safe = __rlm_safe;
    const out = [];
    if (start < 0) start = safe.math.max(this.length + start, 0);
    if (end < 0) end = this.length + end;
    for (let i = start; i < safe.math.min(end, this.length); i++) safe.append(out, this.at(i));
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
  const safe = __rlm_safe;
  if (typeof value === "string") return safe.slice(value, start, end);
  if (safe.isArray(value)) return safe.sliceList(value, start, end);
  if (value instanceof __RLM_Chunks) return value.slice(start, end);
  if (value !== null && typeof value === "object") {
    const out = {};
    const keys = safe.sliceList(safe.keys(value), start, end);
    for (let i = 0; i < keys.length; i++) safe.own(out, keys[i], value[keys[i]]);
    return out;
  }
  throw new TypeError(`peek() cannot slice a ${__rlm_kind(value)}`);
};

function __rlm_finder(pattern, regex) {
  const safe = __rlm_safe;
  if (regex || pattern instanceof safe.RegExp) {
    const isRegExp = pattern instanceof safe.RegExp;
    const source = isRegExp ? safe.regexSource(pattern) : safe.String(pattern);
    const flags = isRegExp ? safe.regexFlags(pattern) : "";
    const re = new safe.RegExp(source, safe.indexOf(flags, "g") !== -1 ? flags : flags + "g");
    return (text, at = 0) => {
      re.lastIndex = at;
      const m = safe.regexExec(re, text);
      return m ? [m.index, m[0]] : null;
    };
  }
  const needle = safe.String(pattern);
  return (text, at = 0) => {
    const found = safe.indexOf(text, needle, at);
    return found === -1 ? null : [found, needle];
  };
}

function __rlm_preview(text, at, length) {
  const { max, floor } = __rlm_safe.math;
  const begin = length < __RLM_PREVIEW_CHARS ? max(at - floor((__RLM_PREVIEW_CHARS - length) / 2), 0) : at;
  return __rlm_safe.slice(text, begin, begin + __RLM_PREVIEW_CHARS);
}

/** The items of an array, the chunks view or an object as `[location, item]` pairs,
 * with the name of the location (`index` or `key`); `null` for anything else. */
function __rlm_items(value) {
  const safe = __rlm_safe;
  const items = [];
  if (safe.isArray(value)) {
    for (let i = 0; i < value.length; i++) safe.append(items, [i, value[i]]);
    return ["index", items];
  }
  if (value instanceof __RLM_Chunks) {
    for (let i = 0; i < value.length; i++) safe.append(items, [i, value.at(i)]);
    return ["index", items];
  }
  if (value !== null && typeof value === "object") {
    const keys = safe.keys(value);
    for (let i = 0; i < keys.length; i++) safe.append(items, [keys[i], value[keys[i]]]);
    return ["key", items];
  }
  return null;
}

/* The lines nearest a pattern that matched nothing (the same rule as the tools env's
 * ctx_grep and Python's search): a pattern worded like a question misses the line that
 * says it another way. Words are runs of letters and digits, case folded, a plural
 * s/es folded, stop-words and regex escapes left out; a line scores the distinct
 * pattern words it holds (its first 4 KB read); the best five are kept. */
const __RLM_NEAREST_LINES = 5;
const __RLM_NEAREST_SCORED = 4096;
const __RLM_STOP_WORDS = (() => {
  const words = ("a about all an and any are as at be been but by can did do does for from had has " +
    "have how i if in into is it its me my no not of on one or our so than that the their them " +
    "then there these they this those to was we were what when where which who whom why will " +
    "with you your").split(" ");
  const set = Object.create(null);
  for (let i = 0; i < words.length; i++) set[words[i]] = true;
  return Object.freeze(set);
})();
/** The empty results of searches that matched nothing (shown with their note). */
const __rlm_no_matches = new __rlm_safe.WeakSet();

function __rlm_fold(word) {
  const safe = __rlm_safe;
  const lower = safe.toLowerCase(word);
  const ends = (tail) => lower.length > tail.length && safe.slice(lower, lower.length - tail.length) === tail;
  const stems = ["ses", "xes", "zes", "ches", "shes"];
  for (let i = 0; i < stems.length; i++) {
    if (lower.length > stems[i].length + 1 && ends(stems[i])) return safe.slice(lower, 0, lower.length - 2);
  }
  if (lower.length >= 4 && ends("s") && !ends("ss")) return safe.slice(lower, 0, lower.length - 1);
  return lower;
}

/** The folded words of `text` that count, each once, in order. */
function __rlm_words(text) {
  const safe = __rlm_safe;
  const re = new safe.RegExp("\\\\.|[\\p{L}\\p{N}]+", "gu");
  const seen = new safe.Set();
  const out = [];
  let found;
  while ((found = safe.regexExec(re, text)) !== null) {
    const word = found[0];
    if (word[0] === "\\") continue;
    const folded = __rlm_fold(word);
    if (__RLM_STOP_WORDS[folded] === true || safe.setHas(seen, folded)) continue;
    safe.setAdd(seen, folded);
    safe.append(out, folded);
  }
  return out;
}

/** The lines of `text` sharing the most words with `pattern`, best first:
 * [{line, offset, shared, text}]. */
function __rlm_nearest(text, pattern) {
  const safe = __rlm_safe;
  const source = pattern instanceof safe.RegExp ? safe.regexSource(pattern) : safe.String(pattern);
  const wanted = new safe.Set();
  const words = __rlm_words(source);
  if (words.length === 0) return [];
  for (let i = 0; i < words.length && i < 32; i++) safe.setAdd(wanted, words[i]);
  const best = [];
  let at = 0;
  let number = 0;
  while (at < text.length) {
    let end = safe.indexOf(text, "\n", at);
    end = end === -1 ? text.length : end + 1;
    number++;
    const line = safe.slice(text, at, end);
    const held = __rlm_words(safe.slice(line, 0, __RLM_NEAREST_SCORED));
    let score = 0;
    for (let i = 0; i < held.length; i++) if (safe.setHas(wanted, held[i])) score++;
    if (score > 0 && (best.length < __RLM_NEAREST_LINES || score > best[best.length - 1].shared)) {
      let shown = safe.slice(line, 0, 200);
      while (shown.length && (shown[shown.length - 1] === "\n" || shown[shown.length - 1] === "\r")) {
        shown = safe.slice(shown, 0, shown.length - 1);
      }
      safe.append(best, { line: number, offset: at, shared: score, text: shown });
      safe.sort(best, (a, b) => b.shared - a.shared || a.line - b.line);
      if (best.length > __RLM_NEAREST_LINES) best.length = __RLM_NEAREST_LINES;
    }
    at = end;
  }
  return best;
}

/** An empty result that says, when shown, that `pattern` matched nothing and which
 * lines come nearest (also in its non-enumerable `nearest`; JSON shows `[]`). */
function __rlm_no_match(pattern, nearest) {
  const safe = __rlm_safe;
  const empty = [];
  safe.defineProperty(empty, "nearest", { value: nearest, enumerable: false });
  safe.defineProperty(empty, "pattern", {
    value: pattern instanceof safe.RegExp ? safe.regexSource(pattern) : safe.String(pattern),
    enumerable: false,
  });
  safe.weakAdd(__rlm_no_matches, empty);
  return empty;
}

/** How a search that matched nothing is shown. */
function __rlm_no_match_text(empty) {
  const safe = __rlm_safe;
  let text = `[]  (no match for ${safe.stringify(empty.pattern)}`;
  const nearest = empty.nearest;
  if (nearest.length === 0) return text + ")";
  text += "; the lines sharing the most words with it:";
  for (let i = 0; i < nearest.length; i++) {
    const n = nearest[i];
    text += `\n  line ${n.line} (offset ${n.offset}, ${n.shared} word${n.shared === 1 ? "" : "s"}): ${n.text}`;
  }
  return text + ")";
}

/** Occurrences of `pattern` (literal and case-sensitive unless `regex` is true or a
 * RegExp is given). In a string: [{offset, line, match, preview}] (lines from 1); in an
 * array: [{index, offset, preview}]; in an object: [{key, offset, preview}] (the first
 * match of each item). Previews are 200 characters around the match. Nothing found in
 * a string: an empty array that shows the lines nearest the pattern when printed. */
globalThis.search = function search(value, pattern, regex = false, max_results = 10) {
  const safe = __rlm_safe;
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
      const offset = hit[0];
      const matched = hit[1];
      for (let i = safe.indexOf(value, "\n", counted); i !== -1 && i < offset; i = safe.indexOf(value, "\n", i + 1)) {
        line++;
      }
      counted = offset;
      safe.append(results, { offset, line, match: matched, preview: __rlm_preview(value, offset, matched.length) });
      at = offset + safe.math.max(matched.length, 1);
      if (at > value.length) break;
    }
    return results.length ? results : __rlm_no_match(pattern, __rlm_nearest(value, pattern));
  }
  const listed = __rlm_items(value);
  if (listed === null) throw new TypeError(`search() cannot search a ${__rlm_kind(value)}`);
  const label = listed[0];
  const items = listed[1];
  for (let i = 0; i < items.length; i++) {
    const text = __rlm_text(items[i][1]);
    const hit = find(text);
    if (hit !== null) {
      safe.append(results, { [label]: items[i][0], offset: hit[0], preview: __rlm_preview(text, hit[0], hit[1].length) });
      if (results.length >= limit) break;
    }
  }
  return results;
};

/** The pieces find_relevant ranks, as `[label, location, text]`: array items, object
 * values, or ~2000-character pieces of a string (cut at a newline where there is one). */
function __rlm_documents(value) {
  const safe = __rlm_safe;
  const docs = [];
  if (typeof value === "string") {
    let at = 0;
    while (at < value.length) {
      let end = safe.math.min(at + __RLM_BM25_CHUNK_CHARS, value.length);
      if (end < value.length) {
        const newline = safe.lastIndexOf(value, "\n", end - 1);
        if (newline >= at + __RLM_BM25_CHUNK_CHARS / 2) end = newline + 1;
      }
      safe.append(docs, ["offset", at, safe.slice(value, at, end)]);
      at = end;
    }
    return docs;
  }
  const listed = __rlm_items(value);
  if (listed === null) throw new TypeError(`find_relevant() cannot rank a ${__rlm_kind(value)}`);
  const items = listed[1];
  for (let i = 0; i < items.length; i++) safe.append(docs, [listed[0], items[i][0], __rlm_text(items[i][1])]);
  return docs;
}

/** `word` with the characters a regular expression reads escaped. */
function __rlm_escape(word) {
  let out = "";
  for (let i = 0; i < word.length; i++) {
    const c = word[i];
    out += __rlm_safe.indexOf(".*+?^${}()|[]\\/", c) === -1 ? c : "\\" + c;
  }
  return out;
}

/** The `top_k` items most relevant to `query` (BM25 over words): [{index|key|offset,
 * score, item}], best first; items with no query word are left out. */
globalThis.find_relevant = function find_relevant(value, query, top_k = 5) {
  const safe = __rlm_safe;
  const { log, max, round } = safe.math;
  const seen = new safe.Map();
  const words = __rlm_all_matches(/\w+/g, safe.toLowerCase(safe.String(query)));
  const terms = [];
  for (let i = 0; i < words.length; i++) {
    if (!safe.mapHas(seen, words[i])) {
      safe.mapSet(seen, words[i], true);
      safe.append(terms, words[i]);
    }
  }
  safe.sort(terms);
  const docs = __rlm_documents(value);
  if (terms.length === 0 || docs.length === 0) return [];
  const word = new safe.RegExp(`\\b(?:${safe.join(safe.map(terms, __rlm_escape), "|")})\\b`, "gi");
  const k1 = 1.5;
  const b = 0.75;
  let totalLength = 0;
  const hits = [];
  const documentFrequency = new safe.Map();
  for (let d = 0; d < docs.length; d++) {
    const text = docs[d][2];
    totalLength += text.length;
    const counts = new safe.Map();
    const found = __rlm_all_matches(word, text);
    for (let i = 0; i < found.length; i++) {
      const key = safe.toLowerCase(found[i]);
      safe.mapSet(counts, key, (safe.mapGet(counts, key) || 0) + 1);
    }
    if (safe.mapSize(counts) > 0) {
      safe.append(hits, { label: docs[d][0], location: docs[d][1], text, counts });
      safe.mapForEach(counts, (_, key) => {
        safe.mapSet(documentFrequency, key, (safe.mapGet(documentFrequency, key) || 0) + 1);
      });
    }
  }
  if (hits.length === 0) return [];
  const average = totalLength / docs.length || 1;
  const scored = safe.map(hits, (hit, position) => {
    let score = 0;
    safe.mapForEach(hit.counts, (tf, key) => {
      const df = safe.mapGet(documentFrequency, key);
      const idf = log((docs.length - df + 0.5) / (df + 0.5) + 1);
      score += (idf * tf * (k1 + 1)) / (tf + k1 * (1 - b + (b * hit.text.length) / average));
    });
    return { score, position };
  });
  safe.sort(scored, (x, y) => y.score - x.score || x.position - y.position);
  return safe.map(safe.sliceList(scored, 0, max(top_k | 0, 0)), (ranked) => {
    const hit = hits[ranked.position];
    const item = hit.label === "offset" ? hit.text : value[hit.location];
    return { [hit.label]: hit.location, score: round(ranked.score * 10000) / 10000, item };
  });
};

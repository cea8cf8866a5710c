// rlm's JavaScript prelude, part 1/4 (core): output capture, rendering values, the
// host bridge and HostError. The parts run in order, once, when a runtime starts
// (see engine.rs); the Rust side has already defined `__rlm_write(stream, text)` and
// the async `__rlm_host(method, argsJson)` before they run.
"use strict";

/** Private copies of the built-ins the prelude relies on, taken before any model code
 * runs. Model code may replace the originals in its own world (`Array.prototype.map`,
 * `JSON.stringify`, `String`, ...) without changing what the host sees: the prelude
 * reads only these copies, never the prototypes' current methods. Prototype methods
 * are *uncurried* (`slice(text, 0, 3)`) through bound functions, which call their
 * target directly, so replacing `Function.prototype.call` changes nothing either.
 * Nothing here iterates with the iteration protocol (`for…of`, spread, destructuring
 * of arrays, `Array.from` of an array): a replaced `Array.prototype[Symbol.iterator]`
 * or iterator `next` would reach it. Lists are walked by index, Maps and Sets with
 * their own `forEach`. */
const __rlm_safe = (() => {
  const { bind, call } = Function.prototype;
  /** `uncurry(f)(self, ...args)` is `f.call(self, ...args)` as it was at startup. */
  const uncurry = bind.call(bind, call);
  const defineProperty = Object.defineProperty;
  const isArray = Array.isArray;
  const arrayFrom = Array.from;
  const mapForEach = uncurry(Map.prototype.forEach);
  const setForEach = uncurry(Set.prototype.forEach);
  const { max, min, trunc } = Math;
  /** A relative index of `slice` (negative from the end, clamped to `[0, length]`). */
  const relative = (n, length) => {
    const number = trunc(+n) || 0;
    return number < 0 ? max(length + number, 0) : min(number, length);
  };
  return Object.freeze({
    String,
    Error,
    RegExp,
    WeakSet,
    Map,
    Set,
    Object,
    stringify: JSON.stringify,
    parse: JSON.parse,
    isArray,
    arrayFrom,
    keys: Object.keys,
    names: Object.getOwnPropertyNames,
    is: Object.is,
    defineProperty,
    getPrototypeOf: Object.getPrototypeOf,
    ownDescriptor: Object.getOwnPropertyDescriptor,
    weakHas: uncurry(WeakSet.prototype.has),
    weakAdd: uncurry(WeakSet.prototype.add),
    mapHas: uncurry(Map.prototype.has),
    mapGet: uncurry(Map.prototype.get),
    mapSet: uncurry(Map.prototype.set),
    mapForEach,
    setForEach,
    setHas: uncurry(Set.prototype.has),
    setAdd: uncurry(Set.prototype.add),
    mapSize: uncurry(Object.getOwnPropertyDescriptor(Map.prototype, "size").get),
    setSize: uncurry(Object.getOwnPropertyDescriptor(Set.prototype, "size").get),
    slice: uncurry(String.prototype.slice),
    startsWith: uncurry(String.prototype.startsWith),
    trim: uncurry(String.prototype.trim),
    indexOf: uncurry(String.prototype.indexOf),
    lastIndexOf: uncurry(String.prototype.lastIndexOf),
    toLowerCase: uncurry(String.prototype.toLowerCase),
    regexExec: uncurry(RegExp.prototype.exec),
    regexFlags: uncurry(Object.getOwnPropertyDescriptor(RegExp.prototype, "flags").get),
    sort: uncurry(Array.prototype.sort),
    math: Object.freeze({ max, min, trunc, floor: Math.floor, ceil: Math.ceil, log: Math.log, round: Math.round }),
    symbolText: uncurry(Symbol.prototype.toString),
    /** A RegExp's pattern (`label=x` of `/label=x/i`), read by the getter as it was. */
    regexSource: uncurry(Object.getOwnPropertyDescriptor(RegExp.prototype, "source").get),
    /** Appends `value` to `list` as an own data property (no setter on
     * `Array.prototype` is reached, unlike `push` or `list[i] = value`). */
    append(list, value) {
      defineProperty(list, list.length, { value, writable: true, enumerable: true, configurable: true });
      return list;
    },
    /** `list.map(f)` without `Array.prototype.map`. */
    map(list, f) {
      const out = [];
      for (let i = 0; i < list.length; i++) {
        defineProperty(out, i, { value: f(list[i], i), writable: true, enumerable: true, configurable: true });
      }
      return out;
    },
    /** `list.slice(start, end)` read by index: no species constructor, no replaced
     * method. `end` undefined is the list's end. */
    sliceList(list, start, end) {
      const length = list.length;
      const from = relative(start, length);
      const to = end === undefined ? length : relative(end, length);
      const out = [];
      for (let i = from; i < to; i++) {
        defineProperty(out, i - from, { value: list[i], writable: true, enumerable: true, configurable: true });
      }
      return out;
    },
    /** The items of `items` as a new array, each passed through `f` (with its index):
     * an array is read by index, anything else (the model's own iterable) is given to
     * `Array.from`. */
    listOf(items, f) {
      if (!isArray(items)) return arrayFrom(items, f);
      const out = [];
      for (let i = 0; i < items.length; i++) {
        defineProperty(out, i, { value: f(items[i], i), writable: true, enumerable: true, configurable: true });
      }
      return out;
    },
    /** A Map's entries as an object (what `Object.fromEntries(map)` gives). */
    mapObject(map) {
      const out = {};
      mapForEach(map, (value, key) => {
        defineProperty(out, key, { value, writable: true, enumerable: true, configurable: true });
      });
      return out;
    },
    /** A Set's values as an array. */
    setList(set) {
      const out = [];
      setForEach(set, (value) => {
        defineProperty(out, out.length, { value, writable: true, enumerable: true, configurable: true });
      });
      return out;
    },
    /** Gives `target` an own data property (no setter anywhere on its prototypes is
     * reached, unlike `target[key] = value`). */
    own(target, key, value) {
      defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
      return target;
    },
    /** `list.join(separator)` without `Array.prototype.join` (items are strings). */
    join(list, separator) {
      let text = "";
      for (let i = 0; i < list.length; i++) text += (i === 0 ? "" : separator) + list[i];
      return text;
    },
    /** The host's functions, defined by the Rust side before the prelude runs. */
    write: __rlm_write,
    host: __rlm_host,
  });
})();

/** A host function (llm_query, sub_rlm, store, ...) failed; the message says why. */
globalThis.HostError = class HostError extends Error {
  constructor(message) {
    super(message);
    // Defined, not assigned: an accessor model code put on `Error.prototype.name` is
    // never reached.
    __rlm_safe.defineProperty(this, "name", { value: "HostError", writable: true, configurable: true });
  }
};

/** Compact JSON of a value; what cannot be JSON (functions, cycles, BigInt) is shown
 * in words instead of failing. */
globalThis.__rlm_json = function (value) {
  const safe = __rlm_safe;
  const seen = new safe.WeakSet();
  try {
    const text = safe.stringify(value, (key, v) => {
      if (typeof v === "bigint") return safe.String(v);
      if (typeof v === "function") return `[function ${v.name || "anonymous"}]`;
      if (typeof v === "symbol") return safe.symbolText(v);
      if (v instanceof safe.Map) return safe.mapObject(v);
      if (v instanceof safe.Set) return safe.setList(v);
      // A regex literal where a helper takes a pattern (`ctx_filter(p, {regex:
      // /status=5\d\d/})`): its pattern, not the `{}` JSON makes of it. Plans'
      // patterns ignore case already.
      if (v instanceof safe.RegExp) return safe.regexSource(v);
      if (v !== null && typeof v === "object") {
        if (safe.weakHas(seen, v)) return "[circular]";
        safe.weakAdd(seen, v);
      }
      return v;
    });
    return text === undefined ? safe.String(value) : text;
  } catch (error) {
    try {
      return safe.String(value);
    } catch (again) {
      return "[a value that cannot be shown]";
    }
  }
};

/** How the REPL shows a value: strings as is, anything else as compact JSON. */
globalThis.__rlm_render = function (value) {
  return typeof value === "string" ? value : __rlm_json(value);
};

/** How console.log shows one argument. */
function __rlm_show(value) {
  if (typeof value === "string") return value;
  if (value instanceof __rlm_safe.Error) {
    return value.stack ? `${value}\n${value.stack}` : __rlm_safe.String(value);
  }
  if (value === undefined) return "undefined";
  if (typeof value === "function") return `[function ${value.name || "anonymous"}]`;
  if (typeof __rlm_no_matches !== "undefined" && __rlm_safe.weakHas(__rlm_no_matches, value)) {
    return __rlm_no_match_text(value);
  }
  return __rlm_json(value);
}

/** One console line: the arguments shown and joined by spaces. */
function __rlm_line(args) {
  return __rlm_safe.join(__rlm_safe.map(args, __rlm_show), " ") + "\n";
}

globalThis.console = {
  log: (...args) => __rlm_safe.write(1, __rlm_line(args)),
  info: (...args) => __rlm_safe.write(1, __rlm_line(args)),
  debug: (...args) => __rlm_safe.write(1, __rlm_line(args)),
  warn: (...args) => __rlm_safe.write(2, __rlm_line(args)),
  error: (...args) => __rlm_safe.write(2, __rlm_line(args)),
};
/** `print(...)` for models used to Python: the same as console.log. */
globalThis.print = globalThis.console.log;

/** One host call: resolves to the reply, or throws HostError with the host's message. */
globalThis.__rlm_call = async function (method, args) {
  const reply = __rlm_safe.parse(await __rlm_safe.host(method, __rlm_safe.stringify(args)));
  if (reply.ok) return reply.value;
  throw new HostError(reply.error);
};

/** The text of a value sent to a model: strings as is, anything else as JSON. */
globalThis.__rlm_text = function (value) {
  return typeof value === "string" ? value : __rlm_json(value);
};

/** A JSON-compatible copy (undefined -> null), so a host call's arguments parse. */
globalThis.__rlm_plain = function (value) {
  if (value === undefined) return null;
  return __rlm_safe.parse(__rlm_json(value));
};

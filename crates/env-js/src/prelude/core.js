// rlm's JavaScript prelude, part 1/3 (core): output capture, rendering values, the
// host bridge and HostError. The parts run in order, once, when a runtime starts
// (see engine.rs); the Rust side has already defined `__rlm_write(stream, text)` and
// the async `__rlm_host(method, argsJson)` before they run.
"use strict";

/** Private copies of the built-ins the prelude relies on, taken before any model code
 * runs. Model code may replace the originals in its own world (`Array.prototype.map`,
 * `JSON.stringify`, `String`, ...) without changing what the host sees: the prelude
 * reads only these copies, never the prototypes' current methods. Prototype methods
 * are *uncurried* (`slice(text, 0, 3)`) through bound functions, which call their
 * target directly, so replacing `Function.prototype.call` changes nothing either. */
const __rlm_safe = (() => {
  const { bind, call } = Function.prototype;
  /** `uncurry(f)(self, ...args)` is `f.call(self, ...args)` as it was at startup. */
  const uncurry = bind.call(bind, call);
  const defineProperty = Object.defineProperty;
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
    isArray: Array.isArray,
    arrayFrom: Array.from,
    fromEntries: Object.fromEntries,
    keys: Object.keys,
    names: Object.getOwnPropertyNames,
    is: Object.is,
    defineProperty,
    weakHas: uncurry(WeakSet.prototype.has),
    weakAdd: uncurry(WeakSet.prototype.add),
    mapHas: uncurry(Map.prototype.has),
    mapGet: uncurry(Map.prototype.get),
    mapSet: uncurry(Map.prototype.set),
    slice: uncurry(String.prototype.slice),
    startsWith: uncurry(String.prototype.startsWith),
    trim: uncurry(String.prototype.trim),
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
    this.name = "HostError";
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
      if (v instanceof safe.Map) return safe.fromEntries(v);
      if (v instanceof safe.Set) return safe.arrayFrom(v);
      // A regex literal where a helper takes a pattern (`ctx_filter(p, {regex:
      // /label=fraud/})`, s18c-seed16 js `aggregate` item 0, s18b-seed15 item 3): its pattern, not
      // the `{}` JSON makes of it. Plans' patterns ignore case already.
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

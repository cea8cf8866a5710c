// rlm's JavaScript prelude, part 1/3 (core): output capture, rendering values, the
// host bridge and HostError. The parts run in order, once, when a runtime starts
// (see engine.rs); the Rust side has already defined `__rlm_write(stream, text)` and
// the async `__rlm_host(method, argsJson)` before they run.
"use strict";

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
  const seen = new WeakSet();
  try {
    const text = JSON.stringify(value, (key, v) => {
      if (typeof v === "bigint") return v.toString();
      if (typeof v === "function") return `[function ${v.name || "anonymous"}]`;
      if (typeof v === "symbol") return v.toString();
      if (v instanceof Map) return Object.fromEntries(v);
      if (v instanceof Set) return Array.from(v);
      if (v !== null && typeof v === "object") {
        if (seen.has(v)) return "[circular]";
        seen.add(v);
      }
      return v;
    });
    return text === undefined ? String(value) : text;
  } catch (error) {
    return String(value);
  }
};

/** How the REPL shows a value: strings as is, anything else as compact JSON. */
globalThis.__rlm_render = function (value) {
  return typeof value === "string" ? value : __rlm_json(value);
};

/** How console.log shows one argument. */
function __rlm_show(value) {
  if (typeof value === "string") return value;
  if (value instanceof Error) return value.stack ? `${value}\n${value.stack}` : String(value);
  if (value === undefined) return "undefined";
  if (typeof value === "function") return `[function ${value.name || "anonymous"}]`;
  return __rlm_json(value);
}

globalThis.console = {
  log: (...args) => __rlm_write(1, args.map(__rlm_show).join(" ") + "\n"),
  info: (...args) => __rlm_write(1, args.map(__rlm_show).join(" ") + "\n"),
  debug: (...args) => __rlm_write(1, args.map(__rlm_show).join(" ") + "\n"),
  warn: (...args) => __rlm_write(2, args.map(__rlm_show).join(" ") + "\n"),
  error: (...args) => __rlm_write(2, args.map(__rlm_show).join(" ") + "\n"),
};
/** `print(...)` for models used to Python: the same as console.log. */
globalThis.print = globalThis.console.log;

/** One host call: resolves to the reply, or throws HostError with the host's message. */
globalThis.__rlm_call = async function (method, args) {
  const reply = JSON.parse(await __rlm_host(method, JSON.stringify(args)));
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
  return JSON.parse(__rlm_json(value));
};

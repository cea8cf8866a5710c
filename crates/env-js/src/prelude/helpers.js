// rlm's JavaScript prelude, part 3/4 (helpers): the helpers served by the host — they
// return Promises, so `await` them (several at once with Promise.all) — and FINAL_VAR,
// SUBMIT, SHOW_VARS. Argument shapes mirror the Python helpers; pairs are arrays.
"use strict";

function __rlm_prompt_args(prompt, context, split, schema) {
  const args = { prompt: __rlm_safe.String(prompt) };
  if (context !== undefined && context !== null) {
    args.context = typeof context === "string" ? context : __rlm_plain(context);
  }
  if (split === true) args.split = true;
  // Checked by the host, which names what is wrong with it.
  if (schema !== undefined && schema !== null) args.schema = __rlm_plain(schema);
  return args;
}

/** The `schema` option of `options`, if any. */
function __rlm_schema_option(options) {
  return options !== null && typeof options === "object" && "schema" in options ? options.schema : null;
}

function __rlm_refs(refs) {
  if (refs === undefined || refs === null) return [];
  if (typeof refs === "string") return [refs];
  return __rlm_safe.listOf(refs, (ref) => __rlm_safe.String(ref));
}

/** One plain call to the sub-model; resolves to its text. A prompt past the
 * sub-model's window is refused with the sizes; with {split: true} its context is split
 * instead, asked piece by piece, and the answers combined. With {schema: S} (a JSON
 * Schema, e.g. {type: "integer"}) the sub-model is held to it and the answer is the
 * parsed value; an answer that does not match throws a HostError naming the mismatch. */
globalThis.llm_query = async function llm_query(prompt, context = null, options = null) {
  const split = options !== null && typeof options === "object" && options.split === true;
  const schema = __rlm_schema_option(options);
  const answer = await __rlm_call("llm_query", __rlm_prompt_args(prompt, context, split, schema));
  return schema !== null && schema !== undefined ? answer : __rlm_text(answer);
};

/** Several sub-model calls at once (prompts: strings or [prompt, context] pairs);
 * answers in order. A failed call's answer is "[llm_query error: ...]". {schema: S}
 * holds each answer to a JSON Schema (see llm_query); an object entry may set its own. */
globalThis.llm_query_parallel = async function llm_query_parallel(prompts, options = null) {
  const split = options !== null && typeof options === "object" && options.split === true;
  const schema = __rlm_schema_option(options);
  const jobs = __rlm_safe.listOf(prompts, (entry) => {
    if (__rlm_safe.isArray(entry) && entry.length === 2) return __rlm_prompt_args(entry[0], entry[1], split, schema);
    if (entry !== null && typeof entry === "object" && "prompt" in entry) {
      const own = "schema" in entry ? entry.schema : schema;
      return __rlm_prompt_args(entry.prompt, entry.context, entry.split === true || split, own);
    }
    return __rlm_prompt_args(entry, null, split, schema);
  });
  const answers = await __rlm_call("llm_query_parallel", { prompts: jobs });
  return __rlm_safe.map(answers || [], (answer, index) => {
    const shaped = jobs[index] !== undefined && "schema" in jobs[index];
    const failed = answer !== null && typeof answer === "object" && "error" in answer;
    if (failed && (!shaped || answer.status === "error")) return `[llm_query error: ${answer.error}]`;
    return shaped ? answer : __rlm_text(answer);
  });
};

/** A summary of `value` by the sub-model. */
globalThis.summarize = async function summarize(value, max_tokens = 500) {
  return __rlm_text(await __rlm_call("summarize", { text: __rlm_text(value), max_tokens: max_tokens | 0 }));
};

/** Runs a combinator plan in the orchestrator (docs/plans.md): split the input, keep
 * some pieces, map each, reduce the results; priced and checked against the budgets and
 * the sub-model's window before any call. Resolves to the answer; the figures are in
 * map_reduce.last. */
globalThis.map_reduce = async function map_reduce(plan = {}) {
  const spec = __rlm_plain(plan);
  const name = typeof spec.input === "string" ? spec.input : "context";
  const args = { plan: spec };
  if (name in globalThis) {
    const value = globalThis[name];
    args.text = typeof value === "string" ? value : __rlm_safe.stringify(__rlm_plain(value));
  }
  const reply = await __rlm_call("run_plan", args);
  globalThis.map_reduce.last = reply;
  return __rlm_text(reply !== null && typeof reply === "object" ? reply.answer : reply);
};

/** The parts given, without the unset ones. */
function __rlm_parts(options) {
  const plain = __rlm_plain(options || {});
  const names = __rlm_safe.keys(plain);
  const out = {};
  for (let i = 0; i < names.length; i++) {
    const value = plain[names[i]];
    if (value !== undefined && value !== null) __rlm_safe.own(out, names[i], value);
  }
  return out;
}

/** Cuts a variable into pieces (docs/plans.md), stored by reference as a new variable;
 * resolves to its key, for ctx_filter and ctx_map. options: {by, size, overlap,
 * pattern}. Figures in ctx_split.last. */
globalThis.ctx_split = async function ctx_split(input = "context", options = {}) {
  const args = { input: __rlm_safe.String(input), split: __rlm_parts({ by: "chars", ...options }) };
  if (typeof input === "string" && input in globalThis) {
    const value = globalThis[input];
    args.text = typeof value === "string" ? value : __rlm_safe.stringify(__rlm_plain(value));
  }
  const reply = await __rlm_call("plan_split", args);
  globalThis.ctx_split.last = reply;
  return reply.pieces;
};

/** The pieces a regex matches or with a line whose number fields meet a condition
 * ({where: "latency_ms > 250"}; no model), or that the sub-model answers yes about, as a new
 * pieces variable; resolves to its key. options: {regex}, {where} or {ask}. */
globalThis.ctx_filter = async function ctx_filter(pieces, options = {}) {
  const reply = await __rlm_call("plan_filter", { pieces: __rlm_safe.String(pieces), filter: __rlm_parts(options) });
  globalThis.ctx_filter.last = reply;
  return reply.pieces;
};

/** Every piece turned into a result, in parallel, priced first: options {ask} (with
 * schema, a JSON Schema: each answer a JSON value of that shape), {count}, {extract},
 * {sub_rlm}, {agent} or {plan}. Resolves to the results variable's key. */
globalThis.ctx_map = async function ctx_map(pieces, options = {}) {
  const reply = await __rlm_call("plan_map", { pieces: __rlm_safe.String(pieces), map: __rlm_parts(options) });
  globalThis.ctx_map.last = reply;
  return reply.results;
};

/** The results made one answer: options {op, k, separator, instruction}. */
globalThis.ctx_reduce = async function ctx_reduce(results, options = { op: "concat" }) {
  const reply = await __rlm_call("plan_reduce", { results: __rlm_safe.String(results), reduce: __rlm_parts(options) });
  globalThis.ctx_reduce.last = reply;
  return __rlm_text(reply.answer);
};

/** A nested RLM (a child process at depth+1) on `query`; resolves to its answer. */
globalThis.sub_rlm = async function sub_rlm(query, context = null) {
  const args = { query: __rlm_safe.String(query) };
  if (context !== undefined && context !== null) {
    args.context = typeof context === "string" ? context : __rlm_plain(context);
  }
  return __rlm_text(await __rlm_call("sub_rlm", args));
};

/** Several nested RLMs at once (jobs: queries or [query, context] pairs, at most
 * --max-parallel running); answers in order. A failed run's answer is
 * "[sub_rlm error: ...]". */
globalThis.sub_rlm_parallel = async function sub_rlm_parallel(jobs) {
  const payload = __rlm_safe.listOf(jobs, (job) => {
    let query = job;
    let context = null;
    if (__rlm_safe.isArray(job) && job.length === 2) {
      query = job[0];
      context = job[1];
    } else if (job !== null && typeof job === "object" && "query" in job) {
      query = job.query;
      context = job.context ?? null;
    }
    const entry = { query: __rlm_safe.String(query) };
    if (context !== undefined && context !== null) {
      entry.context = typeof context === "string" ? context : __rlm_plain(context);
    }
    return entry;
  });
  const answers = await __rlm_call("sub_rlm_parallel", { jobs: payload });
  return __rlm_safe.map(answers || [], (answer) =>
    answer !== null && typeof answer === "object" && "error" in answer
      ? `[sub_rlm error: ${answer.error}]`
      : __rlm_text(answer),
  );
};

/** Runs the external CLI agent on `task` with the store variables named in `refs`;
 * resolves to its answer (or its error object). */
globalThis.spawn_agent = async function spawn_agent(task, refs = null) {
  return __rlm_text(await __rlm_call("spawn_agent", { task: __rlm_safe.String(task), refs: __rlm_refs(refs) }));
};

/** Several agents in parallel: jobs are [task, refs] pairs or tasks; answers in order. */
globalThis.spawn_agents = async function spawn_agents(jobs) {
  const text = __rlm_safe.String;
  const payload = __rlm_safe.listOf(jobs, (job) => {
    if (__rlm_safe.isArray(job)) return { task: text(job[0]), refs: __rlm_refs(job[1]) };
    if (job !== null && typeof job === "object") return { task: text(job.task), refs: __rlm_refs(job.refs) };
    return { task: text(job), refs: [] };
  });
  const answers = await __rlm_call("spawn_agents", { jobs: payload });
  return __rlm_safe.map(answers || [], (answer) => __rlm_text(answer));
};

/** The context store: variables shared with sub-agents (every method is async). */
globalThis.store = Object.freeze({
  /** Stores `value` under `key`; resolves to its reference. */
  set: (key, value) => __rlm_call("store_set", { key: __rlm_safe.String(key), value: __rlm_plain(value) }),
  /** The value of `key`. */
  get: (key) => __rlm_call("store_get", { key: __rlm_safe.String(key) }),
  /** The reference (metadata and file path) of `key`. */
  ref: (key) => __rlm_call("store_ref", { key: __rlm_safe.String(key) }),
  /** References of every variable. */
  list: () => __rlm_call("store_list", {}),
  /** Removes `key`. */
  delete: async (key) => {
    await __rlm_call("store_delete", { key: __rlm_safe.String(key) });
  },
  toString: () => "<store: set(key, value), get(key), ref(key), list(), delete(key) — each returns a Promise>",
});

/** Where FINAL_VAR / SUBMIT leave the answer for the engine to collect. */
globalThis.__rlm_final = null;

/** Finishes the run with the variable `name` (given as a string): a string as is,
 * anything else as JSON. */
globalThis.FINAL_VAR = function FINAL_VAR(name) {
  const safe = __rlm_safe;
  if (typeof name === "string") {
    const key = safe.trim(name);
    if (key in globalThis && !safe.startsWith(key, "__rlm")) {
      globalThis.__rlm_final = { kind: "var", name: key, value: __rlm_render(globalThis[key]) };
      return undefined;
    }
    throw new ReferenceError(
      `FINAL_VAR: no variable named ${safe.stringify(name)}; assign the answer to a variable first ` +
        `(var answer = ...) and call FINAL_VAR("answer"), or use SUBMIT(value)`,
    );
  }
  let owner;
  const keys = safe.keys(globalThis);
  for (let i = 0; i < keys.length && owner === undefined; i++) {
    if (globalThis[keys[i]] === name && !__rlm_is_provided(keys[i])) owner = keys[i];
  }
  globalThis.__rlm_final = { kind: "var", name: owner || "<value>", value: __rlm_render(name) };
  return undefined;
};

/** Finishes the run with `value` when called from code (models write FINAL(x) in code
 * as often as in text): a string as is, anything else as JSON. */
globalThis.FINAL = function FINAL(value) {
  globalThis.__rlm_final = { kind: "var", name: "<FINAL>", value: __rlm_render(value) };
  return undefined;
};

/** Finishes the run with a structured answer. */
globalThis.SUBMIT = function SUBMIT(value = {}) {
  globalThis.__rlm_final = { kind: "submit", value: __rlm_plain(value) };
  return undefined;
};

/** Names the prelude provides, and their values, so they are not listed as yours. */
globalThis.__rlm_base = new Map();
globalThis.__rlm_is_provided = function (name) {
  const safe = __rlm_safe;
  return safe.startsWith(name, "__rlm") || safe.startsWith(name, "__RLM") ||
    (safe.mapHas(__rlm_base, name) && safe.is(safe.mapGet(__rlm_base, name), globalThis[name]));
};

function __rlm_short(value, limit = 80) {
  const safe = __rlm_safe;
  let text;
  if (typeof value === "string") {
    text = safe.stringify(value.length > limit ? safe.slice(value, 0, limit) : value);
  } else if (typeof value === "function") text = `[function ${value.name || "anonymous"}]`;
  else text = __rlm_json(value);
  text = text === undefined ? safe.String(value) : text;
  return text.length <= limit ? text : safe.slice(text, 0, limit - 3) + "...";
}

/** The name of a value's type as SHOW_VARS shows it: `Array`, its constructor's name
 * (read from own data properties only, so no getter model code put on a prototype
 * runs), else `Object`. */
function __rlm_type_name(value) {
  const safe = __rlm_safe;
  if (value === null) return "null";
  if (safe.isArray(value)) return "Array";
  if (typeof value !== "object") return typeof value;
  const proto = safe.getPrototypeOf(value);
  const constructor = proto === null ? undefined : safe.ownDescriptor(proto, "constructor");
  const ctor = constructor === undefined ? undefined : constructor.value;
  const name = typeof ctor === "function" ? safe.ownDescriptor(ctor, "name") : undefined;
  return name !== undefined && typeof name.value === "string" && name.value !== "" ? name.value : "Object";
}

function __rlm_size(value) {
  if (typeof value === "string" || __rlm_safe.isArray(value)) return value.length;
  if (value instanceof __rlm_safe.Map) return __rlm_safe.mapSize(value);
  if (value instanceof __rlm_safe.Set) return __rlm_safe.setSize(value);
  if (value !== null && typeof value === "object") return __rlm_safe.keys(value).length;
  return 0;
}

/** The variables the model defined: [{name, type_name, size, preview}]. */
globalThis.__rlm_user_variables = function () {
  const safe = __rlm_safe;
  const names = safe.names(globalThis);
  const rows = [];
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (__rlm_is_provided(name)) continue;
    const value = globalThis[name];
    safe.append(rows, { name, type_name: __rlm_type_name(value), size: __rlm_size(value), preview: __rlm_short(value) });
  }
  return rows;
};

/** The variables you defined, with type, size (items or chars) and a preview. */
globalThis.SHOW_VARS = function SHOW_VARS() {
  const rows = __rlm_user_variables();
  if (rows.length === 0) return "(no variables defined yet)";
  const lines = __rlm_safe.map(rows, (r) => `${r.name}: ${r.type_name}, size ${r.size} = ${r.preview}`);
  return __rlm_safe.join(lines, "\n");
};

/** Binds a global the engine provides (context, query, history, ...): not listed as
 * one of the model's variables unless the model assigns it again. */
globalThis.__rlm_provide = function (name, value) {
  globalThis[name] = value;
  __rlm_safe.mapSet(__rlm_base, name, value);
};

// rlm's JavaScript prelude, part 3/3 (helpers): the helpers served by the host — they
// return Promises, so `await` them (several at once with Promise.all) — and FINAL_VAR,
// SUBMIT, SHOW_VARS. Argument shapes mirror the Python helpers; pairs are arrays.
"use strict";

function __rlm_prompt_args(prompt, context) {
  const args = { prompt: String(prompt) };
  if (context !== undefined && context !== null) {
    args.context = typeof context === "string" ? context : __rlm_plain(context);
  }
  return args;
}

function __rlm_refs(refs) {
  if (refs === undefined || refs === null) return [];
  if (typeof refs === "string") return [refs];
  return Array.from(refs, String);
}

/** One plain call to the sub-model; resolves to its text. */
globalThis.llm_query = async function llm_query(prompt, context = null) {
  return __rlm_text(await __rlm_call("llm_query", __rlm_prompt_args(prompt, context)));
};

/** Several sub-model calls at once (prompts: strings or [prompt, context] pairs);
 * answers in order. A failed call's answer is "[llm_query error: ...]". */
globalThis.llm_query_parallel = async function llm_query_parallel(prompts) {
  const jobs = Array.from(prompts, (entry) => {
    if (Array.isArray(entry) && entry.length === 2) return __rlm_prompt_args(entry[0], entry[1]);
    if (entry !== null && typeof entry === "object" && "prompt" in entry) {
      return __rlm_prompt_args(entry.prompt, entry.context);
    }
    return __rlm_prompt_args(entry, null);
  });
  const answers = await __rlm_call("llm_query_parallel", { prompts: jobs });
  return (answers || []).map((answer) =>
    answer !== null && typeof answer === "object" && "error" in answer
      ? `[llm_query error: ${answer.error}]`
      : __rlm_text(answer),
  );
};

/** A summary of `value` by the sub-model. */
globalThis.summarize = async function summarize(value, max_tokens = 500) {
  return __rlm_text(await __rlm_call("summarize", { text: __rlm_text(value), max_tokens: max_tokens | 0 }));
};

/** A nested RLM (a child process at depth+1) on `query`; resolves to its answer. */
globalThis.sub_rlm = async function sub_rlm(query, context = null) {
  const args = { query: String(query) };
  if (context !== undefined && context !== null) {
    args.context = typeof context === "string" ? context : __rlm_plain(context);
  }
  return __rlm_text(await __rlm_call("sub_rlm", args));
};

/** Several nested RLMs at once (jobs: queries or [query, context] pairs, at most
 * --max-parallel running); answers in order. A failed run's answer is
 * "[sub_rlm error: ...]". */
globalThis.sub_rlm_parallel = async function sub_rlm_parallel(jobs) {
  const payload = Array.from(jobs, (job) => {
    let query = job;
    let context = null;
    if (Array.isArray(job) && job.length === 2) [query, context] = job;
    else if (job !== null && typeof job === "object" && "query" in job) {
      query = job.query;
      context = job.context ?? null;
    }
    const entry = { query: String(query) };
    if (context !== undefined && context !== null) {
      entry.context = typeof context === "string" ? context : __rlm_plain(context);
    }
    return entry;
  });
  const answers = await __rlm_call("sub_rlm_parallel", { jobs: payload });
  return (answers || []).map((answer) =>
    answer !== null && typeof answer === "object" && "error" in answer
      ? `[sub_rlm error: ${answer.error}]`
      : __rlm_text(answer),
  );
};

/** Runs the external CLI agent on `task` with the store variables named in `refs`;
 * resolves to its answer (or its error object). */
globalThis.spawn_agent = async function spawn_agent(task, refs = null) {
  return __rlm_text(await __rlm_call("spawn_agent", { task: String(task), refs: __rlm_refs(refs) }));
};

/** Several agents in parallel: jobs are [task, refs] pairs or tasks; answers in order. */
globalThis.spawn_agents = async function spawn_agents(jobs) {
  const payload = Array.from(jobs, (job) => {
    if (Array.isArray(job)) return { task: String(job[0]), refs: __rlm_refs(job[1]) };
    if (job !== null && typeof job === "object") return { task: String(job.task), refs: __rlm_refs(job.refs) };
    return { task: String(job), refs: [] };
  });
  const answers = await __rlm_call("spawn_agents", { jobs: payload });
  return (answers || []).map(__rlm_text);
};

/** The context store: variables shared with sub-agents (every method is async). */
globalThis.store = Object.freeze({
  /** Stores `value` under `key`; resolves to its reference. */
  set: (key, value) => __rlm_call("store_set", { key: String(key), value: __rlm_plain(value) }),
  /** The value of `key`. */
  get: (key) => __rlm_call("store_get", { key: String(key) }),
  /** The reference (metadata and file path) of `key`. */
  ref: (key) => __rlm_call("store_ref", { key: String(key) }),
  /** References of every variable. */
  list: () => __rlm_call("store_list", {}),
  /** Removes `key`. */
  delete: async (key) => {
    await __rlm_call("store_delete", { key: String(key) });
  },
  toString: () => "<store: set(key, value), get(key), ref(key), list(), delete(key) — each returns a Promise>",
});

/** Where FINAL_VAR / SUBMIT leave the answer for the engine to collect. */
globalThis.__rlm_final = null;

/** Finishes the run with the variable `name` (given as a string): a string as is,
 * anything else as JSON. */
globalThis.FINAL_VAR = function FINAL_VAR(name) {
  if (typeof name === "string") {
    const key = name.trim();
    if (key in globalThis && !key.startsWith("__rlm")) {
      globalThis.__rlm_final = { kind: "var", name: key, value: __rlm_render(globalThis[key]) };
      return undefined;
    }
    throw new ReferenceError(
      `FINAL_VAR: no variable named ${JSON.stringify(name)}; assign the answer to a variable first ` +
        `(var answer = ...) and call FINAL_VAR("answer"), or use SUBMIT(value)`,
    );
  }
  const owner = Object.keys(globalThis).find((k) => globalThis[k] === name && !__rlm_is_provided(k));
  globalThis.__rlm_final = { kind: "var", name: owner || "<value>", value: __rlm_render(name) };
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
  return name.startsWith("__rlm") || name.startsWith("__RLM") ||
    (__rlm_base.has(name) && Object.is(__rlm_base.get(name), globalThis[name]));
};

function __rlm_short(value, limit = 80) {
  let text;
  if (typeof value === "string") text = JSON.stringify(value.length > limit ? value.slice(0, limit) : value);
  else if (typeof value === "function") text = `[function ${value.name || "anonymous"}]`;
  else text = __rlm_json(value);
  text = text === undefined ? String(value) : text;
  return text.length <= limit ? text : text.slice(0, limit - 3) + "...";
}

function __rlm_type_name(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "Array";
  if (typeof value === "object") return (value.constructor && value.constructor.name) || "Object";
  return typeof value;
}

function __rlm_size(value) {
  if (typeof value === "string" || Array.isArray(value)) return value.length;
  if (value instanceof Map || value instanceof Set) return value.size;
  if (value !== null && typeof value === "object") return Object.keys(value).length;
  return 0;
}

/** The variables the model defined: [{name, type_name, size, preview}]. */
globalThis.__rlm_user_variables = function () {
  return Object.getOwnPropertyNames(globalThis)
    .filter((name) => !__rlm_is_provided(name))
    .map((name) => {
      const value = globalThis[name];
      return { name, type_name: __rlm_type_name(value), size: __rlm_size(value), preview: __rlm_short(value) };
    });
};

/** The variables you defined, with type, size (items or chars) and a preview. */
globalThis.SHOW_VARS = function SHOW_VARS() {
  const rows = __rlm_user_variables();
  if (rows.length === 0) return "(no variables defined yet)";
  return rows.map((r) => `${r.name}: ${r.type_name}, size ${r.size} = ${r.preview}`).join("\n");
};

/** Records every global that exists now as provided (called once the prelude and the
 * built-ins are in place). */
globalThis.__rlm_seal = function () {
  for (const name of Object.getOwnPropertyNames(globalThis)) __rlm_base.set(name, globalThis[name]);
};

/** Binds a global the engine provides (context, query, history, ...): not listed as
 * one of the model's variables unless the model assigns it again. */
globalThis.__rlm_provide = function (name, value) {
  globalThis[name] = value;
  __rlm_base.set(name, value);
};

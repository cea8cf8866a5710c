# rlm's Python kernel, part 5/6 (helpers): the helpers served by the host (llm_query, sub_rlm, spawn_agent(s), store) and FINAL_VAR, SUBMIT, SHOW_VARS.
# The parts are concatenated in order (see kernel.rs) and run as one script.

def summarize(var, max_tokens=500):
    """A summary of `var` by the sub-model (host call `summarize`)."""
    return _as_text(_host("summarize", {"text": _text_of(var), "max_tokens": int(max_tokens)}))


def _as_text(value):
    return value if isinstance(value, str) else _dumps(value)


def _lazy_whole(context, helper):
    return LazyContextError(
        f"{helper} cannot send the whole lazy context (a {_human(context._size)} file): pass "
        "a slice (context[a:b]) or pieces (context_chunks), or use sub_rlm(query, context), "
        "which hands a child run the file by reference"
    )


def _sub_context(args, context):
    """Puts `context` into sub_rlm arguments: a lazy context by its variable's key."""
    if isinstance(context, LazyText):
        if not context._key:
            raise _lazy_whole(context, "sub_rlm")
        args["context_key"] = context._key
    elif context is not None:
        args["context"] = context if isinstance(context, str) else _jsonable(context)


def _prompt_args(prompt, context, split=False, schema=None):
    args = {"prompt": str(prompt)}
    if isinstance(context, LazyText):
        raise _lazy_whole(context, "llm_query")
    if context is not None:
        args["context"] = _jsonable(context) if not isinstance(context, str) else context
    if split:
        args["split"] = True
    if schema is not None:
        # Checked by the host, which names what is wrong with it.
        args["schema"] = _jsonable(schema)
    return args


def llm_query(prompt, context=None, split=False, schema=None):
    """One plain call to the sub-model; returns its text. A prompt past the sub-model's
    window is refused with the sizes; with split=True its context is split instead,
    asked piece by piece, and the answers combined. With schema (a JSON Schema dict,
    e.g. {"type": "integer"}) the sub-model is held to it and the answer is the parsed
    value (int, list, dict...); an answer that does not match raises HostError naming
    the mismatch."""
    answer = _host("llm_query", _prompt_args(prompt, context, split, schema))
    return answer if schema is not None else _as_text(answer)


def llm_query_parallel(prompts, split=False, schema=None):
    """Several sub-model calls at once (prompts: str or (prompt, context)); answers in
    order. A failed call's answer is the string "[llm_query error: ...]". split=True
    splits each call that does not fit the sub-model's window, schema holds each answer
    to a JSON Schema (see llm_query); a dict entry may set its own "schema"."""
    jobs = []
    for entry in prompts:
        if isinstance(entry, (tuple, list)) and len(entry) == 2:
            jobs.append(_prompt_args(entry[0], entry[1], split, schema))
        elif isinstance(entry, dict) and "prompt" in entry:
            jobs.append(_prompt_args(entry["prompt"], entry.get("context"), entry.get("split", split), entry.get("schema", schema)))
        else:
            jobs.append(_prompt_args(entry, None, split, schema))
    answers = _host("llm_query_parallel", {"prompts": jobs})
    out = []
    for job, answer in zip(jobs, answers or []):
        failed = isinstance(answer, dict) and "error" in answer
        if failed and ("schema" not in job or answer.get("status") == "error"):
            out.append(f"[llm_query error: {answer['error']}]")
        elif "schema" in job:
            out.append(answer)
        else:
            out.append(_as_text(answer))
    return out


def map_reduce(plan=None, **parts):
    """Runs a combinator plan in the orchestrator (docs/plans.md): split the input,
    keep some pieces, map each (ask the sub-model, count or extract a pattern, a nested
    run, an agent) and reduce the results. It is priced and checked against the budgets
    and the sub-model's window before any call. Returns the answer; the figures (pieces,
    kept, calls, and the variable holding each piece's result) are in map_reduce.last.

        map_reduce(split={"by": "chars", "size": 8000},
                   map={"ask": "How many errors? Answer with a number."},
                   reduce={"op": "sum"})
    """
    plan = dict(plan or {}, **parts)
    name = plan.get("input", "context")
    args = {"plan": plan}
    value = _MAIN.get(name, _MISSING) if isinstance(name, str) else _MISSING
    if isinstance(value, LazyText):
        if not value._key:
            raise _lazy_whole(value, "map_reduce")
        plan["input"] = value._key
    elif value is not _MISSING:
        args["text"] = value if isinstance(value, str) else _dumps(value)
    reply = _host("run_plan", args)
    map_reduce.last = reply
    return _as_text(reply.get("answer") if isinstance(reply, dict) else reply)


map_reduce.last = None


def _step_input(name, args, helper):
    """Puts the input `name` into a step's arguments: a stored variable by key, a value
    of the REPL as its text."""
    value = _MAIN.get(name, _MISSING) if isinstance(name, str) else _MISSING
    if isinstance(name, LazyText) or isinstance(value, LazyText):
        lazy = name if isinstance(name, LazyText) else value
        if not lazy._key:
            raise _lazy_whole(lazy, helper)
        args["input"] = lazy._key
    elif value is not _MISSING:
        args["input"] = name
        args["text"] = value if isinstance(value, str) else _dumps(value)
    elif isinstance(name, str):
        args["input"] = name
    else:
        raise TypeError(f"{helper}: give the name of a variable (e.g. \"context\"), not a {type(name).__name__}")


def _parts(**options):
    return {name: value for name, value in options.items() if value is not None}


def ctx_split(input="context", by="chars", size=None, overlap=None, pattern=None):
    """Cuts a variable into pieces (docs/plans.md), stored by reference as a new
    variable; returns its key, for ctx_filter and ctx_map. by: chars, lines, tokens,
    regex (with pattern: where each record starts) or records (a JSON list's items);
    size left out: the largest piece the sub-model takes. Figures in ctx_split.last.

        pieces = ctx_split("context", by="lines", size=200)
    """
    args = {"split": _parts(by=by, size=size, overlap=overlap, pattern=pattern)}
    _step_input(input, args, "ctx_split")
    ctx_split.last = _host("plan_split", args)
    return ctx_split.last["pieces"]


def ctx_filter(pieces, regex=None, ask=None, where=None):
    """The pieces a regex matches or with a line whose number fields meet a condition
    (where="latency_ms > 250"; no model), or that the sub-model answers yes about, as a new
    pieces variable; returns its key. Figures in ctx_filter.last."""
    ctx_filter.last = _host("plan_filter", {"pieces": pieces, "filter": _parts(regex=regex, where=where, ask=ask)})
    return ctx_filter.last["pieces"]


def ctx_map(pieces, ask=None, count=None, extract=None, sub_rlm=None, agent=None, plan=None,
            schema=None):
    """Every piece turned into a result, in parallel, priced first (refused with the
    figures if over budget): ask (the sub-model; with schema, a JSON Schema, each
    answer is a JSON value of that shape), count or extract (a pattern, no model),
    sub_rlm (a nested run), agent, or a nested plan. Returns the key of the results
    variable, for ctx_reduce (store.get(key) lists them). Figures in ctx_map.last.

        results = ctx_map(pieces, count="ERROR")
        sizes = ctx_map(pieces, ask="How many rows?", schema={"type": "integer"})
    """
    if schema is not None and ask is None:
        raise ValueError("ctx_map: schema goes with ask only (ctx_map(pieces, ask='...', schema={...}))")
    ctx_map.last = _host("plan_map", {
        "pieces": pieces,
        "map": _parts(ask=ask, schema=schema, count=count, extract=extract, sub_rlm=sub_rlm,
                      agent=agent, plan=plan),
    })
    return ctx_map.last["results"]


def ctx_reduce(results, op="concat", k=None, separator=None, instruction=None,
               key=None, value=None, agg=None):
    """The results (a ctx_map or map_reduce results variable, or any list variable)
    made one answer: sum, count, min, max, concat, vote, union, count_distinct (how
    many distinct items), top_k (k), pairs (how many pairs of items are equal), join,
    argmax (value: the line whose number, the pattern's first group, is largest),
    group_by (key and value: patterns whose first group is a line's key and number;
    agg: count, sum, min or max; k: the largest groups only), or ask (instruction: the
    sub-model combines them). Returns the answer.

        total = ctx_reduce(results, op="sum")
        per_host = ctx_reduce(results, op="group_by", key=r"host=(\S+)", agg="count")
    """
    reduce = _parts(op=op, k=k, separator=separator, instruction=instruction,
                    key=key, value=value, agg=agg)
    ctx_reduce.last = _host("plan_reduce", {"results": results, "reduce": reduce})
    return _as_text(ctx_reduce.last["answer"])


ctx_split.last = ctx_filter.last = ctx_map.last = ctx_reduce.last = None


def sub_rlm(query, context=None):
    """A nested RLM (a child process at depth+1) on `query`; returns its answer."""
    args = {"query": str(query)}
    _sub_context(args, context)
    return _as_text(_host("sub_rlm", args))


def sub_rlm_parallel(jobs):
    """Several nested RLMs at once (jobs: query str or (query, context)); answers in
    order. A failed run's answer is the string "[sub_rlm error: ...]"."""
    payload = []
    for job in jobs:
        if isinstance(job, (tuple, list)) and len(job) == 2:
            query, context = job
        elif isinstance(job, dict) and "query" in job:
            query, context = job["query"], job.get("context")
        else:
            query, context = job, None
        entry = {"query": str(query)}
        _sub_context(entry, context)
        payload.append(entry)
    answers = _host("sub_rlm_parallel", {"jobs": payload})
    out = []
    for answer in answers or []:
        if isinstance(answer, dict) and "error" in answer:
            out.append(f"[sub_rlm error: {answer['error']}]")
        else:
            out.append(_as_text(answer))
    return out


def _refs(refs):
    if refs is None:
        return None
    if isinstance(refs, str):
        return [refs]
    return [str(r) for r in refs]


def spawn_agent(task, refs=None):
    """Runs the external CLI agent on `task` with the store variables named in `refs`."""
    args = {"task": str(task)}
    if refs is not None:
        args["refs"] = _refs(refs)
    return _as_text(_host("spawn_agent", args))


def spawn_agents(jobs):
    """Several agents in parallel: jobs are (task, refs) pairs or tasks; answers in order."""
    payload = []
    for job in jobs:
        if isinstance(job, (tuple, list)):
            task, refs = (job[0], job[1] if len(job) > 1 else None)
        elif isinstance(job, dict):
            task, refs = job.get("task"), job.get("refs")
        else:
            task, refs = job, None
        entry = {"task": str(task)}
        if refs is not None:
            entry["refs"] = _refs(refs)
        payload.append(entry)
    answers = _host("spawn_agents", {"jobs": payload})
    return [_as_text(a) for a in answers or []]


class _Store:
    """The context store: store.set/get/ref/list/delete (variables shared with sub-agents)."""

    def set(self, key, value):
        """Stores `value` under `key`; returns its reference. A lazy context is stored
        as another reference to its file (nothing is copied)."""
        if isinstance(value, LazyText):
            if not value._key:
                raise _lazy_whole(value, "store.set")
            return _host("store_set_ref", {"key": str(key), "from": value._key})
        return _host("store_set", {"key": str(key), "value": _jsonable(value)})

    def get(self, key):
        """The value of `key`, read directly from its file."""
        reference = _host("store_ref", {"key": str(key)})
        path = reference.get("path") if isinstance(reference, dict) else None
        if not path:
            raise HostError(f"store.get({key!r}): the host gave no file path")
        return _load_variable_file(path)

    def ref(self, key):
        """The reference (metadata and file path) of `key`."""
        return _host("store_ref", {"key": str(key)})

    def list(self):
        """References of every variable."""
        return _host("store_list", {})

    def delete(self, key):
        """Removes `key`."""
        _host("store_delete", {"key": str(key)})

    def __repr__(self):
        return "<store: set(key, value), get(key), ref(key), list(), delete(key)>"


class _Shown(str):
    """A str that a REPL echo shows as plain text."""

    def __repr__(self):
        return str(self)


def _render(value):
    return value if isinstance(value, str) else _dumps(value)


def _name_of(value):
    for name, candidate in _MAIN.items():
        if candidate is value and not name.startswith("_") and _BASE.get(name) is not value:
            return name
    return None


def FINAL_VAR(name):
    """Finishes the run with the variable `name` (given as a string): a str as is,
    anything else as JSON."""
    global _final
    if isinstance(name, str) and name.strip() in _MAIN:
        key = name.strip()
        _final = {"kind": "var", "name": key, "value": _render(_MAIN[key])}
        return None
    owner = _name_of(name)
    if owner is not None:
        _final = {"kind": "var", "name": owner, "value": _render(name)}
        return None
    if isinstance(name, str):
        raise NameError(
            f"FINAL_VAR: no variable named {name!r}; assign the answer to a variable "
            "first (answer = ...) and call FINAL_VAR('answer'), or use SUBMIT(value)"
        )
    _final = {"kind": "var", "name": "<value>", "value": _render(name)}
    return None


def FINAL(value):
    """Finishes the run with `value` when called from code (models write FINAL(x) in
    code as often as in text): a str as is, anything else as JSON. As text outside
    code, FINAL(...) is read by the orchestrator instead."""
    global _final
    _final = {"kind": "var", "name": "<FINAL>", "value": _render(value)}
    return None


_MISSING = object()


def SUBMIT(obj=_MISSING, **fields):
    """Finishes the run with a structured answer: SUBMIT({...}) or SUBMIT(field=...)."""
    global _final
    if obj is _MISSING:
        obj = {}
    if fields:
        obj = {**obj, **fields} if isinstance(obj, dict) else {"value": obj, **fields}
    _final = {"kind": "submit", "value": _jsonable(obj)}
    return None


def _short(value, limit=80):
    import reprlib

    shortener = reprlib.Repr()
    shortener.maxstring = limit
    shortener.maxother = limit
    shortener.maxlist = shortener.maxtuple = shortener.maxset = 8
    shortener.maxdict = 4
    try:
        text = shortener.repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _user_variables():
    found = []
    for name, value in list(_MAIN.items()):
        if name.startswith("_") or isinstance(value, type(sys)):
            continue
        if name in _BASE and _BASE[name] is value:
            continue
        try:
            if isinstance(value, (LazyText, LazyLines)):
                size = value._cheap_len()  # len() of a lazy view may read the whole file
            else:
                size = len(value) if not isinstance(value, type) else 0
        except Exception:
            size = 0
        found.append(
            {"name": name, "type_name": type(value).__name__, "size": max(int(size), 0),
             "preview": _short(value)}
        )
    return found


def SHOW_VARS():
    """The variables you defined, with type, size (items or chars) and a preview."""
    rows = _user_variables()
    if not rows:
        return _Shown("(no variables defined yet)")
    lines = [f"{r['name']}: {r['type_name']}, size {r['size']} = {r['preview']}" for r in rows]
    return _Shown("\n".join(lines))

# rlm's Python kernel, part 6/6 (exec): runs cells with captured output and serves the protocol; main().
# The parts are concatenated in order (see kernel.rs) and run as one script.

# ------------------------------------------------------------------------ execution


def _capture_file(name):
    """A new capture file in TMPDIR: (fd, its description for `ready`). The file is
    named so the orchestrator can open it too and bound its size (model code and its
    subprocesses write to fd 1/2 directly, past any cap the driver could keep); the
    name is removed once the orchestrator has it (`_unlink_captures`)."""
    directory = os.path.abspath(os.environ.get("TMPDIR") or "/tmp")
    flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for attempt in range(100):
        path = os.path.join(directory, f".rlm-capture-{os.getpid()}-{name}-{attempt}")
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            continue
        except OSError:
            break
        st = os.fstat(fd)
        _CAPTURE_PATHS.append(path)
        return fd, {"path": path, "dev": st.st_dev, "ino": st.st_ino}
    return os.open(os.devnull, os.O_WRONLY), None


_CAPTURE_PATHS = []


def _unlink_captures():
    """Removes the capture files' names (their fds stay open)."""
    while _CAPTURE_PATHS:
        try:
            os.unlink(_CAPTURE_PATHS.pop())
        except OSError:
            pass


class _Capture(io.TextIOBase):
    """sys.stdout/sys.stderr during an execution: writes through to fd 1/2 (a capture
    file, so C-level and subprocess output lands in order) up to a byte cap."""

    encoding = "utf-8"
    errors = "backslashreplace"

    def __init__(self, fd, cap):
        super().__init__()
        self._fd = fd
        self._left = cap
        self.dropped = 0

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def isatty(self):
        return False

    def flush(self):
        pass

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._write_bytes(text[: max(self._left, 0)].encode("utf-8", "backslashreplace"),
                          len(text))
        return len(text)

    def _write_bytes(self, data, total):
        keep = data[: max(self._left, 0)]
        self.dropped += max(total - len(keep), 0)
        self._left -= len(keep)
        view = memoryview(keep)
        while view:
            view = view[os.write(self._fd, view):]

    @property
    def buffer(self):
        capture = self

        class _Binary:
            def write(self, data):
                data = bytes(data)
                capture._write_bytes(data, len(data))
                return len(data)

            def flush(self):
                pass

        return _Binary()


_out_fd = None
_err_fd = None


def _collect(fd, capture):
    size = os.fstat(fd).st_size
    data = os.pread(fd, min(size, OUTPUT_CAP), 0) if size else b""
    os.ftruncate(fd, 0)
    text = data.decode("utf-8", "replace")
    if size > OUTPUT_CAP or capture.dropped:
        total = max(size, OUTPUT_CAP) + capture.dropped
        text += f"\n[output truncated: about {total} bytes written, the first {OUTPUT_CAP} kept]"
    return text


def _filtered(exc_info):
    import traceback

    try:
        te = traceback.TracebackException(*exc_info, compact=True)
    except TypeError:  # Python < 3.10
        te = traceback.TracebackException(*exc_info)
    seen, pending = set(), [te]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.stack = traceback.StackSummary.from_list(
            [frame for frame in current.stack if frame.filename != DRIVER_FILE]
        )
        pending.extend(x for x in (current.__cause__, current.__context__) if x is not None)
    return "".join(te.format())


def _echo(value):
    if isinstance(value, str) and len(value) > OUTPUT_CAP:
        text = repr(value[:OUTPUT_CAP]) + f" ... [{len(value)} chars]"
    else:
        text = repr(value)
    sys.stdout.write(text + "\n")


_cells = itertools.count(1)


def _run_cell(code):
    import ast
    import linecache

    filename = f"<cell {next(_cells)}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, filename, "exec"), _MAIN)
    if last is not None:
        value = eval(compile(last, filename, "eval"), _MAIN)
        if value is not None:
            _echo(value)


_OWN_FDS = {}


def _remember_fds():
    """Notes which file each of the driver's own fds is, for `_broken_fds`."""
    names = {
        _PROTO_IN: "the protocol input",
        _PROTO_OUT: "the protocol output",
        _STDERR: "the REPL's stderr",
        _out_fd: "the stdout capture file",
        _err_fd: "the stderr capture file",
    }
    for fd, name in names.items():
        st = os.fstat(fd)
        _OWN_FDS[fd] = (name, st.st_dev, st.st_ino)


def _broken_fds():
    """The driver's fds that were closed or replaced (by model code: `os.close(7)`,
    `os.dup2(f, 4)`), as (fd, what it was)."""
    broken = []
    for fd, (name, dev, ino) in _OWN_FDS.items():
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == (dev, ino):
                continue
        except OSError:
            pass
        broken.append((fd, name))
    return broken


def _restore_idle_fds():
    for fd in (1, 2):
        try:
            os.dup2(_STDERR, fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
            except OSError:
                pass


def _execute(message):
    global _IN_EXEC, _final
    _final = None
    out, err = _Capture(1, OUTPUT_CAP), _Capture(2, OUTPUT_CAP)
    error, interrupted = None, False
    try:
        _IDLE_STDOUT.flush()
        os.dup2(_out_fd, 1)
        os.dup2(_err_fd, 2)
        sys.stdout, sys.stderr = out, err
        try:
            _IN_EXEC = True
            _run_cell(message.get("code", ""))
        finally:
            _IN_EXEC = False
    except KeyboardInterrupt:
        interrupted = True
        error = _filtered(sys.exc_info())
    except BaseException:
        error = _filtered(sys.exc_info())
    finally:
        _IN_EXEC = False
        sys.stdout, sys.stderr = _IDLE_STDOUT, _IDLE_STDERR
        _restore_idle_fds()
    if _forked():
        # A child forked by the cell (os.fork) that ran off its end: in a script it
        # would exit here; it must not serve the protocol.
        os._exit(0)
    broken = _broken_fds()
    for fd, name in broken:
        if name.startswith("the protocol"):
            _die(f"the code closed or replaced file descriptor {fd} ({name})")
    if broken:
        described = ", ".join(f"{fd} ({name})" for fd, name in broken)
        return {
            "stdout": "",
            "stderr": "",
            "error": error,
            "final": None,
            "interrupted": interrupted,
            "broken": f"the code closed or replaced the REPL's own file descriptor(s) {described}",
        }
    return {
        "stdout": _collect(_out_fd, out),
        "stderr": _collect(_err_fd, err),
        "error": error,
        "final": _final,
        "interrupted": interrupted,
    }


def _final_var(message):
    name = str(message.get("name", "")).strip()
    if name not in _MAIN or name.startswith("__"):
        return {"found": False}
    return {"found": True, "value": _render(_MAIN[name])}


_BASE = {}
_CONTEXTS = []
CHUNK_CHARS = 100_000


def _provide(name, value):
    """Binds a provided global (not listed among the user's variables)."""
    _MAIN[name] = value
    _BASE[name] = value


def _load_context(source):
    """The value of a context described by a `ContextSource`."""
    files = source.get("files") or []
    if source.get("shape") == "list":
        return [_load_variable_file(path) for path in files]
    if files:
        return _load_variable_file(files[0], source.get("chars"), source.get("max_char"))
    return None


def _add_context(source):
    """Loads a context into the next slot: `contexts[i]`, `context_<i>`, and `context`
    (with `context_chunks`) pointing at it. Returns the slot's index."""
    value = _load_context(source)
    slot = len(_CONTEXTS)
    _CONTEXTS.append(value)
    _provide(f"context_{slot}", value)
    _provide("context", value)
    _provide("context_chunks", _ContextChunks(value, source.get("chunk_chars") or CHUNK_CHARS))
    return slot


def _next_query(message):
    _provide("query", str(message.get("query", "")))
    source = message.get("context")
    if not source:
        return {}
    return {"slot": _add_context(source)}


def _install(init):
    global OUTPUT_CAP, _load_chunk, _out_fd, _err_fd, _captures, _LAZY_ABOVE, _MEMORY_BYTES
    OUTPUT_CAP = int(init.get("output_cap") or OUTPUT_CAP)
    lazy_above = init.get("lazy_above")
    _LAZY_ABOVE = int(lazy_above) if lazy_above is not None else None
    _MEMORY_BYTES = int(init.get("memory_bytes") or _MEMORY_BYTES)
    _load_chunk = int(init.get("load_chunk_bytes") or LOAD_CHUNK)
    (_out_fd, out), (_err_fd, err) = _capture_file("out"), _capture_file("err")
    _captures = [out, err] if out and err else None
    _remember_fds()
    started = time.perf_counter()
    names = {
        "context": None,
        "context_chunks": _ContextChunks(None, CHUNK_CHARS),
        "contexts": _CONTEXTS,
        "query": init.get("query", ""),
        "history": list(init.get("history") or []),
        "peek": peek,
        "search": search,
        "summarize": summarize,
        "find_relevant": find_relevant,
        "llm_query": llm_query,
        "llm_query_parallel": llm_query_parallel,
        "sub_rlm": sub_rlm,
        "map_reduce": map_reduce,
        "ctx_split": ctx_split,
        "ctx_filter": ctx_filter,
        "ctx_map": ctx_map,
        "ctx_reduce": ctx_reduce,
        "sub_rlm_parallel": sub_rlm_parallel,
        "spawn_agent": spawn_agent,
        "spawn_agents": spawn_agents,
        "store": _Store(),
        "SHOW_VARS": SHOW_VARS,
        "FINAL_VAR": FINAL_VAR,
        "FINAL": FINAL,
        "SUBMIT": SUBMIT,
        "HostError": HostError,
        "LazyText": LazyText,
        "ContextChanged": ContextChanged,
    }
    _MAIN.update(names)
    _BASE.update(names)
    for source in [init.get("context")] + list(init.get("more_contexts") or []):
        if source:
            _add_context(source)
    return {
        "method": _load_stats["method"] or "none",
        "seconds": round(time.perf_counter() - started, 6),
    }


def _max_rss_kb():
    try:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except Exception:
        return None


def _serve(message):
    kind = message.get("type")
    if kind == "exec":
        return _execute(message)
    if kind == "final_var":
        return _final_var(message)
    if kind == "list_vars":
        return {"vars": _user_variables()}
    if kind == "push_history":
        entry = {"query": message.get("query", ""), "answer": message.get("answer", "")}
        history = _MAIN.get("history")
        if isinstance(history, list):
            history.append(entry)
        if _BASE.get("history") is not history and isinstance(_BASE.get("history"), list):
            _BASE["history"].append(entry)
        return {}
    if kind == "next_query":
        return _next_query(message)
    return {"error": f"unknown request {kind!r}"}


_captures = None


def _reply_to(message, reply):
    """Sends the `result` of `message`; one too long to send becomes an error."""
    reply["type"] = "result"
    reply["id"] = message.get("id")
    try:
        _send(reply)
    except _TooLarge as error:
        _send({"type": "result", "id": message.get("id"), "error": (
            f"the reply was {error.size} bytes as JSON, more than the {_MAX_MESSAGE} "
            "bytes one REPL message may carry; answer with something smaller "
            "(store.set a large value and answer with its key)")})


def main():
    global _TOKEN, _MAX_MESSAGE
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        import faulthandler

        faulthandler.enable(file=_STDERR, all_threads=True)
    except Exception:
        pass
    threading.Thread(target=_reader, name="rlm-protocol", daemon=True).start()
    init = _requests.get()
    _TOKEN = init.get("token")
    _MAX_MESSAGE = int(init.get("max_message") or _MAX_MESSAGE)
    try:
        if init.get("type") != "init":
            raise RuntimeError(f"expected init, got {init.get('type')!r}")
        loaded = _install(init)
    except BaseException:
        import traceback

        _send({"type": "ready", "ok": False, "error": traceback.format_exc()})
        os._exit(1)
    _send(
        {"type": "ready", "ok": True, "pid": os.getpid(),
         "python": sys.version.split()[0], "load": loaded, "max_rss_kb": _max_rss_kb(),
         "capture": _captures}
    )
    while True:
        message = _requests.get()
        _unlink_captures()  # the orchestrator has opened them before asking anything
        try:
            reply = _serve(message)
        except BaseException as error:
            reply = {"error": f"driver error: {type(error).__name__}: {error}"}
        _reply_to(message, reply)


main()

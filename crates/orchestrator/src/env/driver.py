"""rlm's Python kernel: the driver the orchestrator embeds and runs in `python3`.

The orchestrator (crates/orchestrator/src/env/python.rs) starts `python3 -c BOOT`, where
BOOT reads this file's bytes from stdin and runs them; everything after that on stdin
is the protocol. Why it is built the way it is:

- Protocol channel apart from user output. The protocol uses private duplicates of
  the original stdin/stdout (close-on-exec); fd 0 becomes /dev/null and fds 1/2 point
  at the orchestrator's stderr pipe between executions and at capture files during
  one, so `print`, `os.system('echo hi')` and C-level writes never reach the protocol.
- JSON lines both ways. Orchestrator -> kernel: `init`, `exec`, `final_var`,
  `list_vars`, `push_history`, `next_query` (each with an `id`), `host_result
  {call_id, ok, value|error}`, `shutdown`. Kernel -> orchestrator: `ready`, `result {id, ...}`,
  `host_call {call_id, method, args}`. A reader thread owns the protocol input, so
  a helper such as `llm_query` (from the main thread or any user thread) can send a
  `host_call` and block until its `host_result` while the orchestrator serves
  several calls at once.
- The context never crosses the pipe: it is read from the variable files named in
  `init`. Text is loaded in ~1 MiB chunks straight into one preallocated str (peak
  memory ~1x the text instead of 2-3x for `json.load`); anything unexpected falls
  back to `json`.
- Persistent sessions: each context gets a slot (`contexts[i]`, also `context_<i>`)
  and `context` is the latest; `next_query` sets the new `query` and may bring the
  next slot. A restarted kernel gets every slot again in `init` (`more_contexts`).
- Timeouts are SIGINT: the handler raises KeyboardInterrupt only while user code
  runs; protocol writes block SIGINT so a message is never torn.
"""

import io
import itertools
import json
import os
import queue
import signal
import sys
import threading
import time

DRIVER_FILE = "<rlm-driver>"
OUTPUT_CAP = 1 << 20
LOAD_CHUNK = 1 << 20
BM25_CHUNK_CHARS = 2000
PREVIEW_CHARS = 200

# --------------------------------------------------------------------------- channels

_PROTO_IN = os.dup(0)
_PROTO_OUT = os.dup(1)
_STDERR = os.dup(2)
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
os.close(_devnull)
os.dup2(_STDERR, 1)
sys.stdin = open(os.devnull, "r", encoding="utf-8")
sys.stdout = io.TextIOWrapper(
    io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
    line_buffering=True,
)
_IDLE_STDOUT = sys.stdout
_IDLE_STDERR = sys.stderr
_MAIN = sys.modules["__main__"].__dict__
for _name in [k for k in _MAIN if not k.startswith("__")]:
    del _MAIN[_name]

_send_lock = threading.Lock()
_requests = queue.Queue()
_waiters = {}
_call_ids = itertools.count(1)
_IN_EXEC = False
_final = None


def _jsonable(value, depth=0):
    """A JSON-compatible copy of `value` (tuples/sets -> lists, other objects -> str)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if depth > 100:
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _dumps(value):
    """Compact JSON text; falls back to a sanitised copy for NaN or foreign objects."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def _send(message):
    data = (_dumps(message) + "\n").encode("utf-8", "replace")
    with _send_lock:
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT,))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(_PROTO_OUT, view):]
        except OSError:
            os._exit(0)  # the orchestrator is gone
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _reader():
    with os.fdopen(_PROTO_IN, "rb", buffering=1 << 16) as stream:
        for line in stream:
            try:
                message = json.loads(line)
            except ValueError:
                os.write(_STDERR, b"rlm driver: ignoring a malformed protocol line\n")
                continue
            kind = message.get("type")
            if kind == "host_result":
                slot = _waiters.get(message.get("call_id"))
                if slot is not None:
                    slot[1] = message
                    slot[0].set()
            elif kind == "shutdown":
                os._exit(0)
            else:
                _requests.put(message)
    os._exit(0)  # stdin closed: the orchestrator is gone


class HostError(RuntimeError):
    """A host function (llm_query, sub_rlm, store, ...) failed; the message says why."""


def _host(method, args):
    call_id = next(_call_ids)
    slot = [threading.Event(), None]
    _waiters[call_id] = slot
    try:
        _send({"type": "host_call", "call_id": call_id, "method": method, "args": args})
        slot[0].wait()
    finally:
        _waiters.pop(call_id, None)
    reply = slot[1]
    if reply.get("ok"):
        return reply.get("value")
    raise HostError(reply.get("error") or "the host call failed")


def _on_sigint(signum, frame):
    if _IN_EXEC:
        raise KeyboardInterrupt


# ----------------------------------------------------------------- loading variables


class _Fallback(Exception):
    """The fast text path does not apply; use json."""


class _Widen(Exception):
    """A chunk needs a wider str kind than the one allocated."""

    def __init__(self, kind):
        super().__init__(kind)
        self.kind = kind


class _Layout:
    """CPython's compact str layout, learned at run time and checked by a self-test.

    A str is allocated once with PyUnicode_New for an upper bound of characters (the
    byte length of the escaped value), chunks are copied into its data area, and its
    length field is then set to the real count. Untouched pages of the upper bound
    are never resident.
    """

    def __init__(self):
        import codecs
        import ctypes
        import warnings

        self.ctypes = ctypes
        self.codecs = codecs
        self.warnings = warnings
        new = ctypes.pythonapi.PyUnicode_New
        new.restype = ctypes.py_object
        new.argtypes = (ctypes.c_ssize_t, ctypes.c_uint32)
        self.new = new
        # Offsets from strings made at run time (literals may be shared singletons
        # carrying a cached UTF-8 copy, which getsizeof counts).
        self.ascii_off = sys.getsizeof("a" * 2) - 3
        self.compact_off = sys.getsizeof("\xe9" * 2) - 3
        if (
            sys.getsizeof(chr(0x100) * 2) - 6 != self.compact_off
            or sys.getsizeof(chr(0x10000) * 2) - 12 != self.compact_off
        ):
            raise _Fallback("unexpected str sizes")
        self.len_off = 2 * ctypes.sizeof(ctypes.c_void_p)
        for probe in ("abc" * 2, "x" * 1000):
            if ctypes.c_ssize_t.from_address(id(probe) + self.len_off).value != len(probe):
                raise _Fallback("unexpected str length field")
        for sample in ("abcdef", "ab\xe9d\xffz", "ab\u0100d\ud800f", "a\U0001f600c\ud83dxy"):
            kind, encoded = self.classify(sample)
            s = self.new(len(sample) + 5, self.maxchar(kind))
            if sys.getrefcount(s) != 2:
                raise _Fallback("unexpected reference count")
            if encoded is None:
                encoded = self.encode(sample, kind)
            ctypes.memmove(self.data(s, kind), encoded, len(encoded))
            self.set_length(s, len(sample), kind)
            if len(s) != len(sample) or s != sample or hash(s) != hash(sample):
                raise _Fallback("str self-test failed")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                codecs.escape_decode(b"\\u0041")
                self.escape_warns = False
            except Warning:
                self.escape_warns = True

    @staticmethod
    def classify(text):
        """(kind, text encoded for that kind or None): kind 0 for ASCII, else the bytes
        per character CPython uses for it (1, 2, 4). Found by encoding, never by
        looking inside the str, so it holds on every version."""
        if text.isascii():
            return 0, None
        try:
            return 1, text.encode("latin-1")
        except UnicodeEncodeError:
            pass
        encoded = text.encode("utf-16-le", "surrogatepass")
        if len(encoded) == 2 * len(text):
            return 2, encoded
        return 4, None

    @staticmethod
    def maxchar(kind):
        return {0: 0x7F, 1: 0xFF, 2: 0xFFFF, 4: 0x10FFFF}[kind]

    @staticmethod
    def encode(s, kind):
        if kind <= 1:
            return s.encode("latin-1")
        return s.encode("utf-16-le" if kind == 2 else "utf-32-le", "surrogatepass")

    def data(self, s, kind):
        return id(s) + (self.ascii_off if kind == 0 else self.compact_off)

    def set_length(self, s, length, kind):
        self.ctypes.c_ssize_t.from_address(id(s) + self.len_off).value = length
        self.ctypes.memset(self.data(s, kind) + length * max(kind, 1), 0, max(kind, 1))

    def unescape(self, piece):
        """The JSON string body `piece` unescaped: bytes (UTF-8) or str."""
        if b"\\" not in piece:
            return piece
        if self.escape_warns or not (b"\\u" in piece or b"\\/" in piece):
            with self.warnings.catch_warnings():
                self.warnings.simplefilter("error")
                try:
                    return self.codecs.escape_decode(piece)[0]
                except (Warning, ValueError):
                    pass
        return json.loads(b'"' + piece + b'"')


_layout = None
_layout_failed = False
_load_chunk = LOAD_CHUNK


def _str_layout():
    global _layout, _layout_failed
    if _layout is None and not _layout_failed:
        try:
            _layout = _Layout()
        except Exception as error:  # no ctypes, another implementation, ...
            _layout_failed = True
            os.write(_STDERR, f"rlm driver: fast text loading disabled: {error}\n".encode())
    return _layout


def _safe_cut(data, floor):
    """A split point where no escape sequence, surrogate pair or UTF-8 char is cut
    (None if there is none above `floor`: the caller reads on)."""
    p = len(data) - 1
    while p > floor:
        k = data.rfind(b"\\", max(p - 6, 0), p)
        if k != -1:
            p = k
        elif 0x80 <= data[p] < 0xC0:
            p -= 1
        else:
            return p
    return None


class _Overflow(Exception):
    """More characters than the allocated capacity (a wrong `chars` hint)."""


def _fill_text(stream, start, end, kind, capacity, layout):
    """Reads the JSON string body [start, end) into one str of the given kind.

    Returns the str and the widest kind actually seen, which the caller checks: a str
    whose kind is wider than its content is not canonical and must not escape.
    """
    ctypes = layout.ctypes
    width = max(kind, 1)
    s = layout.new(capacity, layout.maxchar(kind))
    base = layout.data(s, kind)
    written = 0
    seen = 0
    stream.seek(start)
    remaining = end - start
    carry = b""
    while remaining or carry:
        block = stream.read(min(_load_chunk, remaining)) if remaining else b""
        remaining -= len(block)
        data = carry + block if carry else block
        if remaining:
            cut = _safe_cut(data, max(len(data) - 65536, 0))
            if cut is None:
                carry = data
                continue
            piece, carry = data[:cut], data[cut:]
        else:
            piece, carry = data, b""
        if not piece:
            continue
        out = layout.unescape(piece)
        if isinstance(out, bytes) and kind <= 1 and out.isascii():
            if written + len(out) > capacity:
                s = None
                raise _Overflow()
            ctypes.memmove(base + written, out, len(out))
            written += len(out)
            continue
        text = out if isinstance(out, str) else out.decode("utf-8")
        text_kind, encoded = layout.classify(text)
        if text_kind > kind:
            s = None
            raise _Widen(text_kind)
        if written + len(text) > capacity:
            s = None
            raise _Overflow()
        seen = max(seen, text_kind)
        if encoded is None or max(text_kind, 1) != width:
            encoded = layout.encode(text, kind)
        ctypes.memmove(base + written * width, encoded, len(encoded))
        written += len(text)
    layout.set_length(s, written, kind)
    return s, seen


def _kind_of_maxchar(max_char):
    if not max_char or max_char < 0x80:
        return 0
    if max_char < 0x100:
        return 1
    return 2 if max_char < 0x10000 else 4


def _load_text(stream, start, end, chars=None, max_char=None):
    """One str for the JSON string body [start, end), allocated once.

    `chars` and `max_char` are the orchestrator's hints (exact size, widest code point
    class); without them the byte length bounds the size (unused pages are never
    touched) and the kind starts at ASCII, widening on demand with a new pass.
    """
    layout = _str_layout()
    if layout is None or end - start < 2:
        raise _Fallback("short or no layout")
    upper = end - start
    capacity = chars if isinstance(chars, int) and 2 <= chars <= upper else upper
    kind = _kind_of_maxchar(max_char)
    for _attempt in range(8):
        try:
            s, seen = _fill_text(stream, start, end, kind, capacity, layout)
        except _Widen as wider:
            kind = wider.kind
            continue
        except _Overflow:
            capacity = upper
            continue
        if seen < kind:  # the hint was wider than the text: redo it canonically
            s = None
            kind = seen
            continue
        return s
    raise _Fallback("the text kept changing shape")


def _header_layout(stream):
    """(value offset, header) when the file is in the store's header-line layout."""
    line = stream.readline(65536)
    if not line.endswith(b"\n") or not line.rstrip().endswith(b","):
        return None
    if stream.read(8) != b'"value":':
        return None
    try:
        header = json.loads(line.rstrip()[:-1] + b"}")
    except ValueError:
        return None
    if not isinstance(header, dict) or "ref" not in header or "formatVersion" not in header:
        return None
    return len(line) + 8, header


_load_stats = {"method": None}


def _load_variable_file(path, chars=None, max_char=None):
    """The `value` of a variable file, read directly from disk."""
    with open(path, "rb") as stream:
        found = _header_layout(stream)
        if found is not None:
            offset, _header = found
            first = stream.read(1)
            if first == b'"':
                size = os.fstat(stream.fileno()).st_size
                stream.seek(max(size - 64, offset))
                tail = stream.read().rstrip()
                if tail.endswith(b"}") and tail[:-1].rstrip().endswith(b'"'):
                    close = size - 64 if size - 64 > offset else offset
                    close += len(tail[:-1].rstrip()) - 1
                    try:
                        value = _load_text(stream, offset + 1, close, chars, max_char)
                        _load_stats["method"] = "fast"
                        return value
                    except (_Fallback, ValueError):
                        pass
            else:
                stream.seek(offset)
                raw = stream.read().rstrip()
                if raw.endswith(b"}"):
                    try:
                        value = json.loads(raw[:-1])
                        _load_stats["method"] = "json"
                        return value
                    except ValueError:
                        pass
                    finally:
                        raw = None
        stream.seek(0)
        document = json.load(stream)
    if not isinstance(document, dict) or "value" not in document:
        raise ValueError(f"{path}: not a variable file (no top-level \"value\")")
    _load_stats["method"] = "json"
    return document["value"]


# ------------------------------------------------------------------- context chunks


class _ContextChunks:
    """`context_chunks`: a lazy sequence of `context` in pieces of at most N characters.

    A string is cut every N characters; a list (or a dict's values) yields each string
    item's pieces in order, and any other item whole. Pieces are sliced on access,
    never stored.
    """

    def __init__(self, context, size):
        self._size = max(int(size), 1)
        if isinstance(context, dict):
            context = list(context.values())
        if not isinstance(context, list):
            context = [context] if context is not None else []
        self._items = context
        self._starts = []
        total = 0
        for item in context:
            self._starts.append(total)
            total += max(-(-len(item) // self._size), 1) if isinstance(item, str) else 1
        self._len = total

    def __len__(self):
        return self._len

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        index = index.__index__()
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("context_chunks index out of range")
        import bisect

        item_no = bisect.bisect_right(self._starts, index) - 1
        item = self._items[item_no]
        if not isinstance(item, str):
            return item
        at = (index - self._starts[item_no]) * self._size
        return item[at : at + self._size]

    def __iter__(self):
        for i in range(self._len):
            yield self[i]

    def __repr__(self):
        return f"<context_chunks: {self._len} chunks of at most {self._size} chars>"


# -------------------------------------------------------------------------- helpers


def _text_of(value):
    if isinstance(value, str):
        return value
    return _dumps(value)


def peek(var, start=0, end=10):
    """A slice of a list, a dict (by key order) or a string."""
    if isinstance(var, dict):
        keys = list(itertools.islice(var.keys(), start, end)) if start >= 0 else list(var)[start:end]
        return {k: var[k] for k in keys}
    if isinstance(var, (list, tuple, str, bytes, _ContextChunks)) or hasattr(var, "__getitem__"):
        return var[start:end]
    raise TypeError(f"peek() cannot slice a {type(var).__name__}")


def _matcher(pattern, regex):
    if regex or not isinstance(pattern, str):
        import re

        compiled = re.compile(pattern) if isinstance(pattern, (str, bytes)) else pattern
        return lambda text, at=0: (
            (m.start(), m.group(0)) if (m := compiled.search(text, at)) else None
        )

    def literal(text, at=0):
        found = text.find(pattern, at)
        return (found, pattern) if found != -1 else None

    return literal


def _preview(text, at, length):
    begin = max(at - (PREVIEW_CHARS - length) // 2, 0) if length < PREVIEW_CHARS else at
    return text[begin : begin + PREVIEW_CHARS]


def search(var, pattern, regex=False, max_results=10):
    """Occurrences of `pattern` (literal and case-sensitive unless regex=True).

    In a string: [{"offset", "line", "match", "preview"}] (line numbers from 1). In a
    list: [{"index", "offset", "preview"}]; in a dict: [{"key", "offset", "preview"}]
    (the first match of each item). Previews are 200 characters around the match.
    """
    find = _matcher(pattern, regex)
    results = []
    if max_results is None or max_results <= 0:
        max_results = float("inf")
    if isinstance(var, str):
        at, line, counted = 0, 1, 0
        while len(results) < max_results:
            hit = find(var, at)
            if hit is None:
                break
            offset, matched = hit
            line += var.count("\n", counted, offset)
            counted = offset
            results.append(
                {"offset": offset, "line": line, "match": matched,
                 "preview": _preview(var, offset, len(matched))}
            )
            at = offset + max(len(matched), 1)
            if at > len(var):
                break
        return results
    if isinstance(var, dict):
        items, label = var.items(), "key"
    elif isinstance(var, (list, tuple, _ContextChunks)):
        items, label = enumerate(var), "index"
    else:
        raise TypeError(f"search() cannot search a {type(var).__name__}")
    for location, item in items:
        text = _text_of(item)
        hit = find(text)
        if hit is not None:
            offset, matched = hit
            results.append(
                {label: location, "offset": offset, "preview": _preview(text, offset, len(matched))}
            )
            if len(results) >= max_results:
                break
    return results


def _documents(var):
    """(label, lazy (location, text) pairs) that find_relevant ranks; pieces of a
    string are sliced one at a time, never all held."""
    if isinstance(var, dict):
        return "key", ((k, _text_of(v)) for k, v in var.items())
    if isinstance(var, (list, tuple, _ContextChunks)):
        return "index", ((i, _text_of(v)) for i, v in enumerate(var))
    if isinstance(var, str):

        def pieces():
            at = 0
            while at < len(var):
                end = min(at + BM25_CHUNK_CHARS, len(var))
                if end < len(var):
                    newline = var.rfind("\n", at + BM25_CHUNK_CHARS // 2, end)
                    if newline != -1:
                        end = newline + 1
                yield at, var[at:end]
                at = end

        return "offset", pieces()
    raise TypeError(f"find_relevant() cannot rank a {type(var).__name__}")


def find_relevant(var, query, top_k=5):
    """The top_k items most relevant to `query` (BM25 over words).

    A list ranks its items, a dict its values, a string its ~2000-character pieces.
    Returns [{"index"|"key"|"offset", "score", "item"}], best first; items with no
    query word are left out.
    """
    import math
    import re

    terms = sorted(set(re.findall(r"\w+", str(query).lower())))
    label, docs = _documents(var)
    if not terms:
        return []
    word = re.compile(r"\b(?:" + "|".join(map(re.escape, terms)) + r")\b", re.IGNORECASE)
    k1, b = 1.5, 0.75
    total, total_length = 0, 0
    hits, document_frequency = [], {}
    for location, text in docs:
        total += 1
        total_length += len(text)
        counts = {}
        for found in word.findall(text):
            key = found.lower()
            counts[key] = counts.get(key, 0) + 1
        if counts:
            hits.append((location, len(text), counts))
            for key in counts:
                document_frequency[key] = document_frequency.get(key, 0) + 1
    if not hits:
        return []
    average = total_length / total or 1.0
    scored = []
    for position, (location, length, counts) in enumerate(hits):
        score = 0.0
        for key, tf in counts.items():
            df = document_frequency[key]
            idf = math.log((total - df + 0.5) / (df + 0.5) + 1.0)
            score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
        scored.append((score, position))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    results = []
    for score, position in scored[: max(int(top_k), 0)]:
        location, length, _counts = hits[position]
        item = var[location : location + length] if label == "offset" else var[location]
        results.append({label: location, "score": round(score, 4), "item": item})
    return results


def summarize(var, max_tokens=500):
    """A summary of `var` by the sub-model (host call `summarize`)."""
    return _as_text(_host("summarize", {"text": _text_of(var), "max_tokens": int(max_tokens)}))


def _as_text(value):
    return value if isinstance(value, str) else _dumps(value)


def _prompt_args(prompt, context):
    args = {"prompt": str(prompt)}
    if context is not None:
        args["context"] = _jsonable(context) if not isinstance(context, str) else context
    return args


def llm_query(prompt, context=None):
    """One plain call to the sub-model; returns its text."""
    return _as_text(_host("llm_query", _prompt_args(prompt, context)))


def llm_query_parallel(prompts):
    """Several sub-model calls at once (prompts: str or (prompt, context)); answers in
    order. A failed call's answer is the string "[llm_query error: ...]"."""
    jobs = []
    for entry in prompts:
        if isinstance(entry, (tuple, list)) and len(entry) == 2:
            jobs.append(_prompt_args(entry[0], entry[1]))
        elif isinstance(entry, dict) and "prompt" in entry:
            jobs.append(_prompt_args(entry["prompt"], entry.get("context")))
        else:
            jobs.append(_prompt_args(entry, None))
    answers = _host("llm_query_parallel", {"prompts": jobs})
    out = []
    for answer in answers or []:
        if isinstance(answer, dict) and "error" in answer:
            out.append(f"[llm_query error: {answer['error']}]")
        else:
            out.append(_as_text(answer))
    return out


def sub_rlm(query, context=None):
    """A nested RLM (a child process at depth+1) on `query`; returns its answer."""
    args = {"query": str(query)}
    if context is not None:
        args["context"] = context if isinstance(context, str) else _jsonable(context)
    return _as_text(_host("sub_rlm", args))


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
        """Stores `value` under `key`; returns its reference."""
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


# ------------------------------------------------------------------------ execution


def _temp_fd():
    directory = os.environ.get("TMPDIR") or "/tmp"
    flags = os.O_RDWR | os.O_APPEND
    try:
        return os.open(directory, flags | os.O_TMPFILE, 0o600)
    except (AttributeError, OSError):
        pass
    for attempt in range(100):
        path = os.path.join(directory, f".rlm-capture-{os.getpid()}-{attempt}")
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        except OSError:
            break
        os.unlink(path)
        return fd
    return os.open(os.devnull, os.O_WRONLY)


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
        os.dup2(_STDERR, 1)
        os.dup2(_STDERR, 2)
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
    global OUTPUT_CAP, _load_chunk, _out_fd, _err_fd
    OUTPUT_CAP = int(init.get("output_cap") or OUTPUT_CAP)
    _load_chunk = int(init.get("load_chunk_bytes") or LOAD_CHUNK)
    _out_fd, _err_fd = _temp_fd(), _temp_fd()
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
        "spawn_agent": spawn_agent,
        "spawn_agents": spawn_agents,
        "store": _Store(),
        "SHOW_VARS": SHOW_VARS,
        "FINAL_VAR": FINAL_VAR,
        "SUBMIT": SUBMIT,
        "HostError": HostError,
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


def main():
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        import faulthandler

        faulthandler.enable(file=_STDERR, all_threads=True)
    except Exception:
        pass
    threading.Thread(target=_reader, name="rlm-protocol", daemon=True).start()
    init = _requests.get()
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
         "python": sys.version.split()[0], "load": loaded, "max_rss_kb": _max_rss_kb()}
    )
    while True:
        message = _requests.get()
        try:
            reply = _serve(message)
        except BaseException as error:
            reply = {"error": f"driver error: {type(error).__name__}: {error}"}
        reply["type"] = "result"
        reply["id"] = message.get("id")
        _send(reply)


main()

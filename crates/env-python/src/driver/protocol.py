"""rlm's Python kernel: the driver the orchestrator embeds and runs in `python3`.

It is written in six parts, concatenated in this order into one script (see
`DRIVER` in crates/orchestrator/src/env/python/kernel.rs): protocol.py (this one:
channels and host calls), loader.py (variable files -> `context`), lazy.py (referenced
files, read whole or as a lazy LazyText view), explore.py (peek,
search, find_relevant), helpers.py (host helpers, FINAL_VAR, SUBMIT, SHOW_VARS) and
exec.py (running cells, serving requests, main).

The orchestrator (crates/orchestrator/src/env/python.rs) starts `python3 -c BOOT`, where
BOOT reads the script's bytes from stdin and runs them; everything after that on stdin
is the protocol. Why it is built the way it is:

- Protocol channel apart from user output. The protocol uses private duplicates of
  the original stdin/stdout (close-on-exec); fd 0 becomes /dev/null and fds 1/2 point
  at the orchestrator's stderr pipe between executions and at capture files during
  one, so `print`, `os.system('echo hi')` and C-level writes never reach the protocol.
- JSON lines both ways. Orchestrator -> kernel: `init`, `exec`, `final_var`,
  `list_vars`, `push_history`, `next_query` (each with an `id`), `host_result
  {call_id, ok, value|error}`, `shutdown`. Kernel -> orchestrator: `ready`, `result {id, ...}`,
  `host_call {call_id, method, args}` (the orchestrator parses `method` and `args`
  strictly as a `HostCall`: a missing or unknown argument is an error naming it). A reader thread owns the protocol input, so
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
- Model code is not trusted with the protocol. Every message the driver sends carries
  the per-kernel `token` from `init` (a line written to the protocol fd by model code
  or a library does not, and the orchestrator treats it as a protocol error); no
  message is longer than `max_message` bytes (a larger host call fails in Python, a
  larger reply is replaced by an error); a forked child (`multiprocessing`,
  `os.fork`) closes its copies of the protocol fds and its host calls fail at once;
  after each cell the driver checks that its own fds are still what they were, and a
  kernel whose fds were closed or replaced reports `broken` and is restarted.
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

_PID = os.getpid()
_TOKEN = None
_MAX_MESSAGE = 1 << 27
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


class _TooLarge(Exception):
    """A message longer than `max_message` bytes: it is not sent."""

    def __init__(self, size):
        super().__init__(size)
        self.size = size


def _forked():
    return os.getpid() != _PID


def _send(message):
    if _forked():
        os._exit(0)  # a forked child never speaks the protocol
    message["token"] = _TOKEN
    data = (_dumps(message) + "\n").encode("utf-8", "replace")
    if len(data) > _MAX_MESSAGE:
        raise _TooLarge(len(data))
    with _send_lock:
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT,))
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(_PROTO_OUT, view):]
        except OSError:
            _die("the protocol output (fd %d) cannot be written" % _PROTO_OUT)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _die(reason):
    """Ends the kernel at once, saying why on its stderr (the orchestrator shows the
    tail of it and starts a new kernel)."""
    data = ("rlm driver: %s; the REPL cannot go on\n" % reason).encode("utf-8", "replace")
    for fd in (_STDERR, 2):
        try:
            os.write(fd, data)
            break
        except OSError:
            pass
    os._exit(70)


def _reader():
    try:
        with os.fdopen(_PROTO_IN, "rb", buffering=1 << 16, closefd=False) as stream:
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
                    _unlink_captures()
                    os._exit(0)
                else:
                    _requests.put(message)
    except BaseException as error:
        _die("the protocol input (fd %d) failed: %s" % (_PROTO_IN, error))
    _unlink_captures()
    os._exit(0)  # stdin closed: the orchestrator is gone


def _after_fork_in_child():
    """A forked child (multiprocessing, os.fork) must not speak the protocol: its
    writes would interleave with the kernel's and its host calls would never be
    answered. It closes its copies of the protocol fds (so the orchestrator still sees
    the kernel's end) and its host calls fail at once (see `_host`)."""
    for fd in (_PROTO_IN, _PROTO_OUT):
        try:
            os.close(fd)
        except OSError:
            pass


os.register_at_fork(after_in_child=_after_fork_in_child)


class HostError(RuntimeError):
    """A host function (llm_query, sub_rlm, store, ...) failed; the message says why."""


# Found as `__main__.HostError` (a global of the REPL), so it survives pickling: a
# multiprocessing worker's HostError reaches the parent as itself.
HostError.__module__ = "__main__"


def _host(method, args):
    if _forked():
        raise HostError(
            f"{method} cannot be called from a forked process (multiprocessing, os.fork): "
            "only the REPL's own process talks to the orchestrator. Use threads instead "
            "(concurrent.futures.ThreadPoolExecutor), or llm_query_parallel for many prompts."
        )
    call_id = next(_call_ids)
    slot = [threading.Event(), None]
    _waiters[call_id] = slot
    try:
        try:
            _send({"type": "host_call", "call_id": call_id, "method": method, "args": args})
        except _TooLarge as error:
            raise HostError(
                f"{method}: its arguments are {error.size} bytes as JSON, more than the "
                f"{_MAX_MESSAGE} bytes one REPL message may carry; pass smaller pieces"
            ) from None
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

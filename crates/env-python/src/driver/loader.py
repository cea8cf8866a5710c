# rlm's Python kernel, part 2/6 (loader): reads variable files and builds `context` and `context_chunks`.
# The parts are concatenated in order (see kernel.rs) and run as one script.

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


def _safe_cut(data, floor, raw=False):
    """A split point where no escape sequence, surrogate pair or UTF-8 char is cut
    (None if there is none above `floor`: the caller reads on). Raw text has no
    escapes: only UTF-8 characters must stay whole."""
    p = len(data) - 1
    while p > floor:
        k = -1 if raw else data.rfind(b"\\", max(p - 6, 0), p)
        if k != -1:
            p = k
        elif 0x80 <= data[p] < 0xC0:
            p -= 1
        else:
            return p
    return None


class _Overflow(Exception):
    """More characters than the allocated capacity (a wrong `chars` hint)."""


def _fill_text(stream, start, end, kind, capacity, layout, raw=False):
    """Reads the JSON string body [start, end) (raw UTF-8 text with `raw`) into one
    str of the given kind.

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
            cut = _safe_cut(data, max(len(data) - 65536, 0), raw)
            if cut is None:
                carry = data
                continue
            piece, carry = data[:cut], data[cut:]
        else:
            piece, carry = data, b""
        if not piece:
            continue
        out = piece if raw else layout.unescape(piece)
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


def _load_text(stream, start, end, chars=None, max_char=None, raw=False):
    """One str for the JSON string body [start, end) (raw UTF-8 text with `raw`),
    allocated once.

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
            s, seen = _fill_text(stream, start, end, kind, capacity, layout, raw)
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
            offset, header = found
            reference = header.get("ref") or {}
            if reference.get("type") == "file":
                stream.seek(offset)
                raw = stream.read(1 << 20).rstrip()
                if raw.endswith(b"}"):
                    return _open_referenced(json.loads(raw[:-1]), reference.get("key"))
                stream.seek(offset)
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
    reference = document.get("ref")
    if isinstance(reference, dict) and reference.get("type") == "file":
        return _open_referenced(document["value"], reference.get("key"))
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
        self._counted = None  # counted on first use: a lazy item's length is a pass

    def _count(self):
        if self._counted is None:
            starts, total = [], 0
            for item in self._items:
                starts.append(total)
                if isinstance(item, (str, LazyText)):
                    total += max(-(-len(item) // self._size), 1)
                else:
                    total += 1
            self._counted = (starts, total)
        return self._counted

    @property
    def _starts(self):
        return self._count()[0]

    @property
    def _len(self):
        return self._count()[1]

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
        if not isinstance(item, (str, LazyText)):
            return item
        at = (index - self._starts[item_no]) * self._size
        return item[at : at + self._size]

    def __iter__(self):
        for i in range(self._len):
            yield self[i]

    def __repr__(self):
        if self._counted is None and any(isinstance(i, LazyText) for i in self._items):
            return f"<context_chunks: pieces of at most {self._size} chars of a lazy context>"
        return f"<context_chunks: {self._len} chunks of at most {self._size} chars>"

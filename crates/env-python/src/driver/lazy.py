# rlm's Python kernel, part 3/6 (lazy): contexts read from the files they refer to, whole or lazily.
# The parts are concatenated in order (see kernel.rs) and run as one script.

# A `file` variable names a file on disk (path, size, mtime, inode, device). Below
# `lazy_above` bytes `context` is a real str, decoded straight from the file; above it,
# `context` is a LazyText: a read-only, memory-mapped view that behaves like a string
# for what models do with one, without loading the file.

import mmap as _mmap

_LAZY_ABOVE = None  # from init: referenced files larger than this are lazy (None: never)
_MEMORY_BYTES = 4 << 30  # from init: what the model's code may allocate
_BLOCK = 1 << 20  # bytes per block of a LazyText's character and line index
_WINDOW = 32 << 20  # bytes scanned at once by find/count/search
_OVERLAP = 1 << 16  # bytes a regex window reads past its end (longest match found whole)


class ContextChanged(OSError):
    """The file a context refers to changed since the run referenced it."""


def _human(n):
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "bytes" else f"{n} bytes"
        n /= 1000


def _check_unchanged(ref, st):
    path = ref.get("path")
    if st.st_ino != ref.get("inode") or st.st_dev != ref.get("device"):
        what = "it was replaced by another file (a new inode)"
    elif st.st_size != ref.get("size"):
        what = f"its size went from {ref.get('size')} to {st.st_size} bytes"
    elif st.st_mtime_ns != ref.get("mtimeNs"):
        what = "it was modified (its modification time moved)"
    else:
        return
    raise ContextChanged(
        f"the context file {path} changed since the run referenced it: {what}; start the "
        "run again to reference it as it is now, or pass --copy-context to work on a copy"
    )


def _open_checked(ref):
    """An open file descriptor of the referenced file, checked to be unchanged."""
    path = ref.get("path")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ContextChanged(
            f"the context file {path} changed since the run referenced it: it no longer "
            "exists; start the run again, or pass --copy-context to work on a copy"
        ) from None
    try:
        _check_unchanged(ref, os.fstat(fd))
    except BaseException:
        os.close(fd)
        raise
    return fd


def _not_utf8(path, offset):
    return ValueError(
        f"the context file {path} is not valid UTF-8 at byte offset {offset}; convert it to "
        "UTF-8 (e.g. with iconv) first"
    )


def _open_referenced(ref, key=None):
    """The text of a referenced file: a str, or a LazyText when it is larger than
    `lazy_above`."""
    size = int(ref.get("size") or 0)
    if _LAZY_ABOVE is not None and size > _LAZY_ABOVE:
        return LazyText(ref, key)
    fd = _open_checked(ref)
    try:
        if size == 0:
            return ""
        text = None
        # Chunk by chunk into one str allocated once (the file's size in memory, not
        # twice); the decoder below is the fallback, and names a bad byte's offset.
        try:
            with open(os.dup(fd), "rb", buffering=0) as stream:
                text = _load_text(stream, 0, size, raw=True)
        except (_Fallback, ValueError):
            text = None
        if text is None:
            with _mmap.mmap(fd, 0, access=_mmap.ACCESS_READ) as mapped:
                try:
                    text = str(mapped, "utf-8")
                except UnicodeDecodeError as error:
                    raise _not_utf8(ref.get("path"), error.start) from None
        _check_unchanged(ref, os.fstat(fd))
        _load_stats["method"] = "file"
        return text
    finally:
        os.close(fd)


class LazyContextError(TypeError):
    """An operation on a lazy context that would load it whole."""


class LazyText:
    """`context` for a file too large to load: a read-only view of its UTF-8 text.

    len(), indexing and slicing (by characters), `in`, find/rfind/index/count,
    startswith/endswith, iteration over lines (`for line in context`, newlines kept),
    splitlines()/split("\\n") as lazy line sequences, iter_split(sep), finditer/findall
    (regular expressions) and the helpers search/peek/find_relevant/context_chunks work
    without loading it. Anything else a str can do (lower(), replace(), str(context), …)
    loads it whole, and only when that fits the kernel's memory (--kernel-memory-mb).
    """

    def __init__(self, ref, key=None):
        self._ref = dict(ref)
        self._key = key
        self._path = ref.get("path")
        fd = _open_checked(ref)
        try:
            self._size = os.fstat(fd).st_size
            self._mm = _mmap.mmap(fd, 0, access=_mmap.ACCESS_READ) if self._size else b""
        finally:
            os.close(fd)
        blocks = max(-(-self._size // _BLOCK), 1)
        self._blocks = blocks
        # Per block b (bytes [b*_BLOCK, (b+1)*_BLOCK)): the offset of its first character
        # start, the characters and newlines before that offset, and whether it is ASCII.
        self._lead = [0]
        self._chars = [0]
        self._lines = [0]
        self._ascii = []
        self._cached = (None, None)  # (block, decoded text) of the last non-ASCII block
        _load_stats["method"] = "lazy"

    # ------------------------------------------------------------------ the index

    def _release(self, start, end):
        """Drops mapped pages of [start, end) from this process (they stay cached by
        the system), so scanning a file larger than memory keeps the RSS small."""
        if not self._size:
            return
        start -= start % _mmap.PAGESIZE
        end = min(end, self._size)
        if end > start:
            try:
                self._mm.madvise(_mmap.MADV_DONTNEED, start, end - start)
            except (AttributeError, ValueError, OSError):
                pass

    def _next_lead(self, at):
        """The first character start at or after byte `at`."""
        while at < self._size and 0x80 <= self._mm[at] < 0xC0:
            at += 1
        return min(at, self._size)

    def _index_one(self):
        b = len(self._ascii)
        start = self._lead[b]
        end = self._size if b + 1 >= self._blocks else self._next_lead((b + 1) * _BLOCK)
        piece = self._mm[start:end]
        if piece.isascii():
            chars, ascii_ = len(piece), True
        else:
            try:
                chars, ascii_ = len(piece.decode("utf-8")), False
            except UnicodeDecodeError as error:
                raise _not_utf8(self._path, start + error.start) from None
        self._lead.append(end)
        self._chars.append(self._chars[-1] + chars)
        self._lines.append(self._lines[-1] + piece.count(b"\n"))
        self._ascii.append(ascii_)
        self._release(b * _BLOCK, (b + 1) * _BLOCK)

    def _indexed(self):
        return len(self._ascii) >= self._blocks

    def _index_to_char(self, i):
        while not self._indexed() and self._chars[-1] <= i:
            self._index_one()

    def _index_to_byte(self, p):
        while not self._indexed() and self._lead[-1] <= p:
            self._index_one()

    def _index_all(self):
        while not self._indexed():
            self._index_one()

    def _block_text(self, b):
        if self._cached[0] != b:
            self._cached = (b, self._mm[self._lead[b] : self._lead[b + 1]].decode("utf-8"))
        return self._cached[1]

    def _block_of_char(self, i):
        import bisect

        self._index_to_char(i)
        return min(bisect.bisect_right(self._chars, i) - 1, len(self._ascii) - 1)

    def _byte_of_char(self, i):
        """Byte offset where character `i` starts (the size for i == len)."""
        if i <= 0 or not self._size:
            return 0
        b = self._block_of_char(i)
        if b < 0:
            return self._size
        k = i - self._chars[b]
        if self._ascii[b]:
            return min(self._lead[b] + k, self._lead[b + 1])
        text = self._block_text(b)
        if k >= len(text):
            return self._lead[b + 1]
        return self._lead[b] + len(text[:k].encode("utf-8"))

    def _block_of_byte(self, p):
        import bisect

        self._index_to_byte(p)
        return max(min(bisect.bisect_right(self._lead, p) - 1, len(self._ascii) - 1), 0)

    def _char_of_byte(self, p):
        """Characters before byte offset `p` (a character start)."""
        if p <= 0 or not self._size:
            return 0
        b = self._block_of_byte(p)
        k = p - self._lead[b]
        if self._ascii[b]:
            return self._chars[b] + k
        return self._chars[b] + len(self._mm[self._lead[b] : p].decode("utf-8", "ignore"))

    def _line_of_byte(self, p):
        """1-based line number of byte offset `p`."""
        if p <= 0 or not self._size:
            return 1
        b = self._block_of_byte(p)
        return self._lines[b] + self._mm[self._lead[b] : p].count(b"\n") + 1

    def _char_range(self, start, end):
        """Byte range of characters [start, end) (None bounds: whole)."""
        n = None
        if start is None:
            start = 0
        if end is None:
            return self._byte_of_char(max(start, 0)) if start >= 0 else self._neg(start), self._size
        if start < 0 or end < 0:
            n = len(self)
            start = max(start + n, 0) if start < 0 else start
            end = max(end + n, 0) if end < 0 else end
        return self._byte_of_char(start), self._byte_of_char(max(end, start))

    def _neg(self, i):
        return self._byte_of_char(max(i + len(self), 0))

    # ------------------------------------------------------------ like a str

    def __len__(self):
        self._index_all()
        return self._chars[-1]

    def __bool__(self):
        return self._size > 0

    def _cheap_len(self):
        """len() when the index is built, else the size in bytes (an upper bound)."""
        return self._chars[-1] if self._indexed() else self._size

    def _decode(self, start, end):
        if end - start > _MEMORY_BYTES // 2:
            raise MemoryError(
                f"that slice is {_human(end - start)}, more than half the kernel's memory "
                f"({_human(_MEMORY_BYTES)}, --kernel-memory-mb): take smaller slices"
            )
        return self._mm[start:end].decode("utf-8")

    def __getitem__(self, index):
        if isinstance(index, slice):
            if index.step not in (None, 1):
                start, stop, step = index.indices(len(self))
                if step < 0:
                    lo, hi = stop + 1, start + 1
                    return self[lo:hi][::-1][:: -step] if lo < hi else ""
                return self[start:stop][::step]
            start, stop = index.start, index.stop
            if start is not None:
                start = start.__index__()
            if stop is not None:
                stop = stop.__index__()
            a, b = self._char_range(start, stop)
            return self._decode(a, b) if b > a else ""
        i = index.__index__()
        if i < 0:
            i += len(self)
        if i < 0 or (self._indexed() and i >= self._chars[-1]):
            raise IndexError("context index out of range")
        a = self._byte_of_char(i)
        b = self._byte_of_char(i + 1)
        if b <= a:
            raise IndexError("context index out of range")
        return self._decode(a, b)

    def __iter__(self):
        """The lines of the text, each with its newline (like a file)."""
        fd = _open_checked(self._ref)
        with open(fd, "r", encoding="utf-8", newline="\n", buffering=1 << 20) as lines:
            yield from lines

    def lines(self):
        """The lines, each with its newline (the same as iterating)."""
        return iter(self)

    def _find_bytes(self, needle, start=0, end=None):
        """Byte offset of `needle` in [start, end), scanning a window at a time."""
        end = self._size if end is None else min(end, self._size)
        at = start
        while at < end:
            stop = min(at + _WINDOW + len(needle), end)
            found = self._mm.find(needle, at, stop)
            self._release(at, min(at + _WINDOW, end))
            if found != -1:
                return found
            if stop >= end:
                break
            at += _WINDOW
        return -1

    def _rfind_bytes(self, needle, start=0, end=None):
        end = self._size if end is None else min(end, self._size)
        hi = end
        while hi > start:
            lo = max(hi - _WINDOW - len(needle), start)
            found = self._mm.rfind(needle, lo, hi)
            self._release(lo, hi)
            if found != -1:
                return found
            if lo <= start:
                break
            hi = lo + len(needle)
        return -1

    @staticmethod
    def _needle(sub, method):
        if isinstance(sub, LazyText):
            raise LazyContextError(f"context.{method}() needs a str, not another lazy context")
        if not isinstance(sub, str):
            raise TypeError(f"must be str, not {type(sub).__name__}")
        return sub.encode("utf-8")

    def find(self, sub, start=None, end=None):
        needle = self._needle(sub, "find")
        a, b = self._char_range(start, end)
        if not needle:
            return self._char_of_byte(a) if a <= b else -1
        found = self._find_bytes(needle, a, b)
        return -1 if found == -1 else self._char_of_byte(found)

    def rfind(self, sub, start=None, end=None):
        needle = self._needle(sub, "rfind")
        a, b = self._char_range(start, end)
        if not needle:
            return self._char_of_byte(b)
        found = self._rfind_bytes(needle, a, b)
        return -1 if found == -1 else self._char_of_byte(found)

    def index(self, sub, start=None, end=None):
        found = self.find(sub, start, end)
        if found == -1:
            raise ValueError("substring not found")
        return found

    def rindex(self, sub, start=None, end=None):
        found = self.rfind(sub, start, end)
        if found == -1:
            raise ValueError("substring not found")
        return found

    def __contains__(self, sub):
        return self._find_bytes(self._needle(sub, "__contains__")) != -1

    def count(self, sub, start=None, end=None):
        needle = self._needle(sub, "count")
        a, b = self._char_range(start, end)
        if not needle:
            return self._char_of_byte(b) - self._char_of_byte(a) + 1
        overlaps = any(needle[:k] == needle[-k:] for k in range(1, len(needle)))
        total = 0
        if overlaps:  # occurrences may overlap: count them left to right, as str does
            at = a
            while True:
                found = self._find_bytes(needle, at, b)
                if found == -1:
                    return total
                total += 1
                at = found + len(needle)
        at = a
        while at < b:
            stop = min(at + _WINDOW + len(needle) - 1, b)
            total += self._mm[at:stop].count(needle)
            self._release(at, at + _WINDOW)
            at += _WINDOW
        return total

    def startswith(self, prefix, start=None, end=None):
        if isinstance(prefix, tuple):
            return any(self.startswith(p, start, end) for p in prefix)
        needle = self._needle(prefix, "startswith")
        a, b = self._char_range(start, end)
        return b - a >= len(needle) and self._mm[a : a + len(needle)] == needle

    def endswith(self, suffix, start=None, end=None):
        if isinstance(suffix, tuple):
            return any(self.endswith(s, start, end) for s in suffix)
        needle = self._needle(suffix, "endswith")
        a, b = self._char_range(start, end)
        return b - a >= len(needle) and self._mm[b - len(needle) : b] == needle

    def splitlines(self, keepends=False):
        """A lazy sequence of the lines (len, indexing, slicing, iteration)."""
        return LazyLines(self, keepends=keepends, split=False)

    def split(self, sep=None, maxsplit=-1):
        if sep == "\n" and maxsplit == -1:
            return LazyLines(self, keepends=False, split=True)
        if maxsplit is not None and 0 <= maxsplit <= 1000 and sep:
            pieces, at = [], 0
            for _ in range(maxsplit):
                found = self.find(sep, at)
                if found == -1:
                    break
                pieces.append(self[at:found])
                at = found + len(sep)
            pieces.append(self[at:])
            return pieces
        raise LazyContextError(
            f"context is a lazy view of a {_human(self._size)} file, and "
            f"context.split({sep!r}) would build every piece in memory: iterate instead "
            "(`for line in context:`, context.splitlines() or context.split('\\n') for a "
            "lazy list of lines, context.iter_split(sep) for other separators), or use "
            "search(context, ...) and context_chunks"
        )

    def iter_split(self, sep):
        """The pieces between occurrences of `sep`, one at a time."""
        if not sep:
            raise ValueError("empty separator")
        needle = sep.encode("utf-8")
        at = 0
        while True:
            found = self._find_bytes(needle, at)
            end = self._size if found == -1 else found
            yield self._decode(at, end)
            if found == -1:
                return
            at = found + len(needle)

    def _windows(self):
        """(byte offset, text, characters of its own) of consecutive windows: each
        text runs _OVERLAP bytes past the next window's start, so a match straddling
        the cut is seen whole; only matches starting in its own characters count."""
        at = 0
        while at < self._size:
            cut = self._next_lead(min(at + _WINDOW, self._size))
            stop = self._next_lead(min(cut + _OVERLAP, self._size))
            try:
                text = self._mm[at:stop].decode("utf-8")
                own = len(text) - len(self._mm[cut:stop].decode("utf-8"))
            except UnicodeDecodeError as error:
                raise _not_utf8(self._path, at + error.start) from None
            self._release(at, cut)
            yield at, text, own
            at = cut

    def finditer(self, pattern, flags=0):
        """(character offset, re.Match) of each match of a regular expression, in
        order; a match longer than 64 KiB may be cut short at a window's end."""
        import re

        compiled = re.compile(pattern, flags) if isinstance(pattern, str) else pattern
        skip = 0  # characters of this window a match of the previous one covered
        for at, text, own in self._windows():
            base = None
            overhang = 0
            for match in compiled.finditer(text, skip):
                if match.start() >= own:
                    break
                if base is None:
                    base = self._char_of_byte(at)
                overhang = max(match.end() - own, 0)
                yield base + match.start(), match
            skip = overhang

    def findall(self, pattern, flags=0):
        """Like re.findall over the whole text."""
        return [m.group(0) if m.re.groups == 0 else (m.group(1) if m.re.groups == 1 else m.groups())
                for _, m in self.finditer(pattern, flags)]

    def _search(self, pattern, regex, max_results):
        """search() for a lazy context (see search)."""
        results = []
        if regex or not isinstance(pattern, str):
            for offset, match in self.finditer(pattern):
                start = match.start()
                text = match.string
                begin = max(start - (PREVIEW_CHARS - len(match.group(0))) // 2, 0)
                line = self._line_of_byte(self._byte_of_char(offset))
                results.append({"offset": offset, "line": line, "match": match.group(0),
                                "preview": text[begin : begin + PREVIEW_CHARS]})
                if len(results) >= max_results:
                    break
            return results
        needle = self._needle(pattern, "search")
        if not needle:
            return results
        at = 0
        while len(results) < max_results:
            found = self._find_bytes(needle, at)
            if found == -1:
                break
            offset = self._char_of_byte(found)
            begin = max(offset - (PREVIEW_CHARS - len(pattern)) // 2, 0)
            results.append({"offset": offset, "line": self._line_of_byte(found),
                            "match": pattern, "preview": self[begin : begin + PREVIEW_CHARS]})
            at = found + len(needle)
        return results

    def _pieces(self, size):
        """(character offset, text) pieces of about `size` characters, cut after a
        newline where there is one (what find_relevant ranks)."""
        for at, text, own in self._windows():
            own = text[:own]
            base = self._char_of_byte(at)
            i = 0
            while i < len(own):
                end = min(i + size, len(own))
                if end < len(own):
                    newline = own.rfind("\n", i + size // 2, end)
                    if newline != -1:
                        end = newline + 1
                yield base + i, own[i:end]
                i = end

    # ------------------------------------------------------- loading it whole

    def _whole(self, what):
        if self._size * 2 > _MEMORY_BYTES:
            raise MemoryError(
                f"context is a lazy view of a {_human(self._size)} file; {what} would load it "
                f"whole, which does not fit the kernel's memory ({_human(_MEMORY_BYTES)}, "
                "--kernel-memory-mb): work on slices (context[a:b]), lines (`for line in "
                "context:`), search(context, ...), context.finditer(...) or context_chunks"
            )
        return self._decode(0, self._size)

    def __str__(self):
        return self._whole("str(context)")

    def __getattr__(self, name):
        if name.startswith("_") or not hasattr(str, name):
            raise AttributeError(f"'LazyText' object has no attribute {name!r}")

        def method(*args, **kwargs):
            return getattr(self._whole(f"context.{name}()"), name)(*args, **kwargs)

        return method

    def __eq__(self, other):
        if isinstance(other, LazyText):
            return self._ref.get("path") == other._ref.get("path") and self._size == other._size
        if not isinstance(other, str):
            return NotImplemented
        encoded = other.encode("utf-8")
        return len(encoded) == self._size and self.startswith(other)

    def __hash__(self):
        return hash((self._path, self._size, self._ref.get("mtimeNs")))

    def __add__(self, other):
        return self._whole("context + …") + other

    def __radd__(self, other):
        return other + self._whole("… + context")

    def __repr__(self):
        return (
            f"<lazy context: a read-only view of the {_human(self._size)} UTF-8 file "
            f"{self._path!r}; len(), slices, find/count/in, `for line in context`, "
            "splitlines(), finditer() and search(context, ...) work without loading it>"
        )


class LazyLines:
    """The lines of a LazyText as a lazy sequence: len, indexing, slicing, iteration."""

    def __init__(self, text, keepends, split):
        self._text = text
        self._keepends = keepends
        self._split = split  # str.split("\n") semantics: a trailing newline ends with ""

    def __len__(self):
        t = self._text
        t._index_all()
        newlines = t._lines[-1]
        if self._split:
            return newlines + 1
        if not t._size:
            return 0
        return newlines + (0 if t._mm[t._size - 1] == 10 else 1)

    def _cheap_len(self):
        """len() when the index is built, else 0 (unknown without reading the file)."""
        return len(self) if self._text._indexed() else 0

    def _start_of(self, i):
        """Byte offset where line i starts."""
        if i == 0:
            return 0
        t = self._text
        import bisect

        while not t._indexed() and t._lines[-1] < i:
            t._index_one()
        b = max(bisect.bisect_left(t._lines, i) - 1, 0)
        at, seen = t._lead[b], t._lines[b]
        while seen < i:
            at = t._mm.find(b"\n", at) + 1
            seen += 1
        return at

    def __getitem__(self, index):
        n = len(self)
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(n))]
        i = index.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("line index out of range")
        t = self._text
        start = self._start_of(i)
        newline = t._mm.find(b"\n", start)
        end = t._size if newline == -1 else newline + (1 if self._keepends else 0)
        return t._decode(start, end)

    def __iter__(self):
        last = None
        for line in self._text:
            last = line
            yield line if self._keepends or not line.endswith("\n") else line[:-1]
        if self._split and (last is None or last.endswith("\n")):
            yield ""

    def __repr__(self):
        return f"<lazy list of the lines of {self._text._path!r}>"

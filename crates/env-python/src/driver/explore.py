# rlm's Python kernel, part 4/6 (explore): peek, search and find_relevant, which need no host.
# The parts are concatenated in order (see kernel.rs) and run as one script.

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


# The lines nearest a pattern that matched nothing (the same rule as the tools env's
# ctx_grep): a pattern worded like a question ("spare rotation code for X") misses the
# line that says it another way ("the spare rotation codes for X are"). Words are runs
# of letters and digits, case folded, a plural s/es folded, stop-words and regex escapes
# left out; a line scores the distinct pattern words it holds (its first 4 KB read).
NEAREST_LINES = 5
_NEAREST_SCORED_CHARS = 4096
_NEAREST_SHOWN_CHARS = 200
_STOP_WORDS = frozenset(
    "a about all an and any are as at be been but by can did do does for from had has have "
    "how i if in into is it its me my no not of on one or our so than that the their them "
    "then there these they this those to was we were what when where which who whom why "
    "will with you your".split()
)


def _fold(word):
    word = word.lower()
    for stem_end in ("ses", "xes", "zes", "ches", "shes"):
        if len(word) > len(stem_end) + 1 and word.endswith(stem_end):
            return word[:-2]
    if len(word) >= 4 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _words(text):
    import re

    text = re.sub(r"\\.", " ", text)
    for word in re.findall(r"[^\W_]+", text):
        word = _fold(word)
        if word not in _STOP_WORDS:
            yield word


class NoMatch(list):
    """What search() returns when nothing matched: an empty list (len 0, false, == [])
    that says so when shown, with the lines sharing the most words with the pattern in
    `.nearest` ([{"line", "offset", "shared", "text"}], best first)."""

    def __init__(self, pattern, nearest=()):
        super().__init__()
        self.pattern = pattern
        self.nearest = list(nearest)

    def __repr__(self):
        shown = self.pattern if isinstance(self.pattern, str) else getattr(self.pattern, "pattern", self.pattern)
        head = f"[]  (no match for {shown!r}"
        if not self.nearest:
            return head + ")"
        lines = "".join(
            f"\n  line {n['line']} (offset {n['offset']}, {n['shared']} word"
            f"{'' if n['shared'] == 1 else 's'}): {n['text']}"
            for n in self.nearest
        )
        return head + "; the lines sharing the most words with it:" + lines + ")"

    __str__ = __repr__


def _nearest_lines(lines, pattern):
    """The best NEAREST_LINES of `lines` ((line text) in order) for `pattern`'s words."""
    import heapq

    source = pattern if isinstance(pattern, str) else getattr(pattern, "pattern", "")
    if isinstance(source, bytes):
        source = source.decode("utf-8", "replace")
    wanted = list(dict.fromkeys(_words(source)))[:32]
    if not wanted:
        return []
    wanted_set = set(wanted)
    best, offset = [], 0
    for number, line in enumerate(lines, 1):
        start = offset
        offset += len(line)
        score = len(wanted_set.intersection(_words(line[:_NEAREST_SCORED_CHARS])))
        if score == 0:
            continue
        ranked = (score, -number, start, line)
        if len(best) < NEAREST_LINES:
            heapq.heappush(best, ranked)
        elif ranked > best[0]:
            heapq.heapreplace(best, ranked)
    best.sort(reverse=True)
    return [
        {"line": -neg, "offset": start, "shared": score,
         "text": line.rstrip("\r\n")[:_NEAREST_SHOWN_CHARS]}
        for score, neg, start, line in best
    ]


def _lines_with_ends(text):
    """The lines of a string, each with its newline (offsets add up)."""
    at = 0
    while at < len(text):
        end = text.find("\n", at)
        end = len(text) if end == -1 else end + 1
        yield text[at:end]
        at = end


def search(var, pattern, regex=False, max_results=10):
    """Occurrences of `pattern` (literal and case-sensitive unless regex=True).

    In a string: [{"offset", "line", "match", "preview"}] (line numbers from 1). In a
    list: [{"index", "offset", "preview"}]; in a dict: [{"key", "offset", "preview"}]
    (the first match of each item). Previews are 200 characters around the match.
    Nothing found in a text: an empty NoMatch, which shows the nearest lines.
    """
    results = _search_hits(var, pattern, regex, max_results)
    if results or not isinstance(var, (str, LazyText)):
        return results
    lines = iter(var) if isinstance(var, LazyText) else _lines_with_ends(var)
    return NoMatch(pattern, _nearest_lines(lines, pattern))


def _search_hits(var, pattern, regex, max_results):
    results = []
    if max_results is None or max_results <= 0:
        max_results = float("inf")
    if isinstance(var, LazyText):
        return var._search(pattern, regex, max_results)
    find = _matcher(pattern, regex)
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
        if isinstance(item, LazyText):
            found = item._search(pattern, regex, 1)
            if found:
                results.append({label: location, "offset": found[0]["offset"],
                                "preview": found[0]["preview"]})
                if len(results) >= max_results:
                    break
            continue
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
    if isinstance(var, LazyText):
        return "offset", var._pieces(BM25_CHUNK_CHARS)
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

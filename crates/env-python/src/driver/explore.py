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


def search(var, pattern, regex=False, max_results=10):
    """Occurrences of `pattern` (literal and case-sensitive unless regex=True).

    In a string: [{"offset", "line", "match", "preview"}] (line numbers from 1). In a
    list: [{"index", "offset", "preview"}]; in a dict: [{"key", "offset", "preview"}]
    (the first match of each item). Previews are 200 characters around the match.
    """
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

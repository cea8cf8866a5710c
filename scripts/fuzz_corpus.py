#!/usr/bin/env python3
"""Writes the seed corpora of the bolero fuzz targets (run from the repository root).

Each target reads its input bytes through a small code (pieces picked by byte value, see
the target's source); this script encodes real inputs — whole, cut and broken model
replies, SSE streams, variable files, kernel protocol lines — in that code, so every
`cargo test` replays them and a long random run starts from shapes that matter. The
files are committed; run this again after changing a target's pieces.
"""

import hashlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(target_dir, name, data):
    corpus = os.path.join(ROOT, target_dir, "corpus")
    os.makedirs(corpus, exist_ok=True)
    with open(os.path.join(corpus, name), "wb") as f:
        f.write(data)


# ------------------------------------------------------------ model replies (orchestrator/tests/it/fuzz.rs)
# reply_from: byte < 34 picks a piece; 5 is "\n", 6 is " "; bytes >= 34 are themselves
# (the replies below avoid "!", byte 33, which is a piece).

def reply_code(text):
    out = bytearray()
    for ch in text:
        if ch == "\n":
            out.append(5)
        elif ch == " ":
            out.append(6)
        else:
            code = ord(ch)
            if code < 34 or code > 255:
                continue  # not representable; such replies use the pieces instead
            out.append(code)
    return bytes(out)


REPLIES = {
    "code_then_final": "Let me look.\n```repl\nprint(len(context))\n```\n",
    "final": "The answer is FINAL(42)",
    "final_var": "```repl\nx = 'a'\n```\nFINAL_VAR(x)",
    "unclosed_fence": "```python\nprint(1)\n",
    "misfenced_js": "```js\nconsole.log(1)\n```",
    "tilde_fence": "~~~\nprint(2)\n~~~",
    "nested_parens": "FINAL(f(g(1), (2)))",
    "tool_call_text": '<tool_call>\n{"name": "ctx_grep", "arguments": {"pattern": "x"}}\n</tool_call>',
    "tool_fence": '```tool\n{"tool": "ctx_slice", "arguments": {"start": 0, "end": 10}}\n```',
    "two_blocks": "```repl\na = 1\n```\ntext\n```repl\nprint(a)\n```",
}


# ------------------------------------------------------------ SSE streams (orchestrator/src/provider/stream_fuzz.rs)
# body_from: the first byte is the chunk size; then low two bits 0-2 pick EVENTS[byte >> 2],
# low bits 3 pick FRAGMENTS[byte >> 2] (or the byte itself past them).

def ev(i):
    return i << 2


def frag(i):
    return (i << 2) | 3


OPENAI_START, OPENAI_TEXT1, OPENAI_TEXT2, OPENAI_CALL, OPENAI_ARGS, OPENAI_USAGE, OPENAI_DONE, OPENAI_ERROR, KEEPALIVE = range(9)
A_START, A_TEXT, A_TOOL_START, A_TOOL_ARGS, A_DELTA, A_STOP, A_ERROR, A_PING = range(9, 17)
F_DATA, F_DATA_NOSPACE, F_EVENT, F_NL, F_CRLF, F_CR, F_NLNL, F_OPEN, F_CLOSE, F_QUOTE, F_DONE, F_STOP_WORD, F_STOP_CUT, F_CONTENT_CUT = range(14)

STREAMS = {
    "openai_whole": [OPENAI_START, OPENAI_TEXT1, OPENAI_TEXT2, OPENAI_USAGE, OPENAI_DONE],
    "openai_tool_call": [OPENAI_START, OPENAI_CALL, OPENAI_ARGS, OPENAI_ARGS, OPENAI_DONE],
    "openai_cut": [OPENAI_START, OPENAI_TEXT1],
    "openai_error": [OPENAI_START, OPENAI_ERROR],
    "openai_keepalive": [KEEPALIVE, OPENAI_TEXT1, KEEPALIVE, OPENAI_DONE],
    "anthropic_whole": [A_START, A_PING, A_TEXT, A_DELTA, A_STOP],
    "anthropic_tool": [A_START, A_TOOL_START, A_TOOL_ARGS, A_TOOL_ARGS, A_DELTA, A_STOP],
    "anthropic_cut": [A_START, A_TEXT],
    "anthropic_overloaded": [A_START, A_ERROR],
}


def stream_code(events, chunk, tail=()):
    return bytes([chunk] + [ev(e) for e in events] + list(tail))


# ------------------------------------------------------------ variable files (context-store/tests/it/fuzz.rs)
# file_from: byte < 20 picks a piece (15 is "\n"); other bytes are themselves.

def variable_file(value_json, kind, size, sha):
    header = (
        '{"formatVersion":1,"ref":{"id":"32900b0f-b5b8-4465-943e-3b947334aca6","key":"k",'
        f'"scope":"global","type":"{kind}","sizeBytes":{size},"createdAt":1795492039590,'
        f'"sha256":"{sha}"}},"persist":true,'
    )
    return header + "\n" + f'"value":{value_json}}}'


def file_code(text):
    return bytes(15 if b == 10 else b for b in text.encode("utf-8"))


# ------------------------------------------------------------ kernel protocol (orchestrator/src/env/python/protocol_fuzz.rs)
# stream_from: the first byte is the chunk size; then low two bits 0-2 pick MESSAGES[byte >> 2],
# low bits 3 pick FRAGMENTS[byte >> 2] (or the byte itself past them).

K_READY, K_RESULT, K_FINAL, K_FORGED, K_LLM, K_AGENTS, K_SUBRLM, K_SET, K_UNKNOWN, K_BADARGS, K_NOTREADY, K_NOTJSON, K_EMPTY = range(13)
KF_OPEN, KF_CLOSE, KF_TOKEN, KF_OTHER_TOKEN, KF_RESULT, KF_HOST_CALL, KF_BIG_ID, KF_NEG_ID = range(8)
KF_X = 17

KERNEL_STREAMS = {
    "ready_then_result": [K_READY, K_RESULT],
    "host_calls": [K_READY, K_LLM, K_AGENTS, K_SUBRLM, K_SET, K_RESULT],
    "bad_host_calls": [K_READY, K_UNKNOWN, K_BADARGS],
    "forged_final": [K_READY, K_FORGED, K_FINAL],
    "not_ready": [K_NOTREADY],
    "garbage_line": [K_READY, K_NOTJSON, K_RESULT],
    "empty_lines": [K_EMPTY, K_EMPTY, K_READY],
}


def main():
    replies_dir = "crates/orchestrator/tests/it/__fuzz__"
    for name, text in REPLIES.items():
        data = reply_code(text)
        write(f"{replies_dir}/fuzz__response_parser", name, data)
        write(f"{replies_dir}/fuzz__text_tool_calls", name, data)

    sse_dir = "crates/orchestrator/src/provider/__fuzz__"
    for target in ("provider__stream_fuzz__openai_stream", "provider__stream_fuzz__anthropic_stream"):
        for name, events in STREAMS.items():
            write(f"{sse_dir}/{target}", name, stream_code(events, 63))  # one 64-byte chunk
            write(f"{sse_dir}/{target}", name + "_bytewise", stream_code(events, 0))  # 1 byte at a time
        write(f"{sse_dir}/{target}", "crlf_lines", bytes([7, frag(F_DATA), frag(F_DONE), frag(F_CRLF), frag(F_CRLF)]))
        write(f"{sse_dir}/{target}", "cut_stop", stream_code([A_START], 5, [frag(F_DATA), frag(F_STOP_CUT)]))
        write(f"{sse_dir}/{target}", "stop_word_in_text", stream_code([A_START], 9, [frag(F_DATA), frag(F_CONTENT_CUT), frag(F_STOP_WORD), frag(F_QUOTE), frag(F_CLOSE), frag(F_NLNL)]))

    kernel_dir = "crates/orchestrator/src/env/python/__fuzz__/env__python__protocol_fuzz__kernel_protocol"
    for name, messages in KERNEL_STREAMS.items():
        write(kernel_dir, name, bytes([63] + [ev(m) for m in messages]))
        write(kernel_dir, name + "_bytewise", bytes([0] + [ev(m) for m in messages]))
    # A line longer than the reader's bound, and one cut off by the end of the stream.
    write(kernel_dir, "too_long", bytes([5, ev(K_READY)] + [frag(KF_X)] * 400))
    write(kernel_dir, "cut_at_the_end", bytes([7, ev(K_READY), frag(KF_OPEN), frag(KF_TOKEN), frag(KF_RESULT)]))
    write(kernel_dir, "fields_by_hand", bytes([3, frag(KF_OPEN), frag(KF_HOST_CALL), 0x2c, frag(KF_TOKEN), 0x2c,
                                               frag(KF_NEG_ID), frag(KF_CLOSE), frag(16)]))

    store_dir = "crates/context-store/tests/it/__fuzz__/fuzz__variable_file_reader"
    text_value = 'hello "x"'
    text_sha = hashlib.sha256(text_value.encode()).hexdigest()
    text_file = variable_file('"hello \\"x\\""', "text", 9 + 4, text_sha)
    json_value = '[1,2,{"a":null}]'
    json_file = variable_file(json_value, "json", len(json_value), hashlib.sha256(json_value.encode()).hexdigest())
    files = {
        "text": text_file,
        "json": json_file,
        "truncated_value": text_file[: len(text_file) - 6],
        "header_only": text_file.split("\n")[0],
        "tampered_value": text_file.replace("hello", "jello"),
        "wrong_size": text_file.replace('"sizeBytes":13', '"sizeBytes":99'),
        "empty": "",
        "not_json": "hello",
    }
    for name, text in files.items():
        write(store_dir, name, file_code(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())

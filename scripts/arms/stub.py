#!/usr/bin/env python3
"""A stub arm for `rlm-orchestrate eval --arm` (docs/eval.md): answers the generated
suites from the context deterministically, without a model, so that CI can test the
external-arm code path (placeholders, output file or stdout, the JSON answer form,
failures, timeouts, --resume) against the oracle suites.

It reads the whole context and computes the answer as `mock-llm --oracle` does: the
needle(s) of `sniah` and `multi-needle`, the counts, most frequent label and sums of
`aggregate`, the pairs of `pairs`. Python 3 standard library only.

Usage (the placeholders are filled in by eval):
    stub.py --context-file {context_file} (--question {question} | --question-file
            {question_file}) [--output-file {output_file}] [--json] [--forced]
            [--counter FILE] [--delay S] [--fail] [--hang]

  --output-file F  write the answer to F (else it is printed on stdout)
  --json           answer in the JSON form, with a made-up usage (characters / 4)
  --forced         mark the answer as forced (with --json)
  --counter FILE   append "<context file name>" to FILE on every invocation (first
                   thing, so an invocation that is killed is counted too)
  --delay S        sleep S seconds before answering
  --fail           print a message on stderr and exit 3
  --hang           sleep forever (for timeouts)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter


def solve(question: str, context: str) -> str:
    """The answer to `question` computed from `context` ("I do not know." if none)."""
    def needle(key: str) -> str | None:
        m = re.search(r"The special magic number for %s is (\d+)\." % re.escape(key), context)
        return m.group(1) if m else None

    def label_of(line: str) -> str | None:
        parts = line.split(" label=", 1)
        return parts[1].split(" ", 1)[0] if len(parts) == 2 else None

    m = re.search(r"special magic numbers for (.+?) mentioned", question)
    if m:
        keys = m.group(1).replace(" and ", ", ").split(", ")
        return ", ".join(n for n in (needle(k) for k in keys) if n is not None)
    m = re.search(r"special magic number for (\S+) mentioned", question)
    if m:
        return needle(m.group(1)) or "I do not know."
    lines = context.splitlines()
    m = re.search(r"How many records in the context have label=(\w+)", question)
    if m:
        return str(sum(1 for line in lines if label_of(line) == m.group(1)))
    if "Which label appears in the most records" in question:
        counts = Counter(label for label in map(label_of, lines) if label is not None)
        return max(sorted(counts), key=lambda label: counts[label]) if counts else "I do not know."
    m = re.search(r"sum of the amount fields of the records with label=(\w+)", question)
    if m:
        total = 0
        for line in lines:
            if label_of(line) == m.group(1):
                amount = line.rsplit("amount=", 1)[-1].strip()
                if amount.isdigit():
                    total += int(amount)
        return str(total)
    if "How many pairs of different persons" in question:
        young: Counter[str] = Counter()
        for line in lines:
            city = re.search(r"city=(\S+)", line)
            year = re.search(r"year=(\d+)\s*$", line)
            if city and year and int(year.group(1)) > 2000:
                young[city.group(1)] += 1
        return str(sum(n * (n - 1) // 2 for n in young.values()))
    return "I do not know."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--context-file", required=True)
    parser.add_argument("--question")
    parser.add_argument("--question-file")
    parser.add_argument("--output-file")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--forced", action="store_true")
    parser.add_argument("--counter")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--hang", action="store_true")
    args = parser.parse_args()
    if args.counter:
        with open(args.counter, "a", encoding="utf-8") as counter:
            counter.write(os.path.basename(args.context_file) + "\n")
    if args.fail:
        print("stub arm: failing on purpose (--fail)", file=sys.stderr)
        return 3
    if args.hang:
        print("stub arm: hanging on purpose (--hang)", file=sys.stderr, flush=True)
        while True:
            time.sleep(3600)
    if args.delay:
        time.sleep(args.delay)
    if args.question_file:
        with open(args.question_file, encoding="utf-8") as f:
            question = f.read()
    elif args.question is not None:
        question = args.question
    else:
        parser.error("give --question or --question-file")
    with open(args.context_file, encoding="utf-8") as f:
        context = f.read()
    answer = solve(question, context)
    if args.json:
        text = json.dumps({
            "answer": answer,
            "usage": {"prompt_tokens": len(context) // 4, "completion_tokens": len(answer) // 4 + 1},
            "forced": args.forced,
        })
    else:
        text = answer
    if args.output_file:
        with open(args.output_file, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

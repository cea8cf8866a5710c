#!/usr/bin/env python3
"""An arm of `rlm-orchestrate eval` (docs/eval.md) answering with the official RLM
library, `rlms` 0.1.3 from PyPI (https://github.com/alexzhang13/rlm): the paper's
reference implementation, against the same OpenAI-compatible endpoint and model as the
eval's own arms.

It calls `RLM(backend="openai", backend_kwargs={"model_name", "base_url", "api_key"},
max_iterations=N).completion(context, root_prompt=question)` with every other setting at
the library's default (local Python REPL, max_depth 1; max_iterations 30 unless
--max-iterations is given), and writes the JSON answer form: {"answer": ...,
"usage": {"prompt_tokens", "completion_tokens"}, "forced": bool}. `forced` is true when
the library ran out of iterations and asked the model for a final answer (its
`_default_answer`). Usage is the library's own count of every call of the completion
(root and `llm_query` sub-calls). With --trajectory-file, what the library's own logger
captured (every iteration: the reply, the code, its output) is written there as JSON.

Install the library with scripts/arms/setup-rlms.sh (its own venv), then a bare
`rlm-orchestrate eval --arm rlms ...` runs this adapter (built into the binary) with the
rlm arm's model, server, API key variable, --max-iterations, --request-timeout and
--temperature; or by hand:

    rlm-orchestrate eval --arm rlms="$(scripts/arms/setup-rlms.sh python) \\
        scripts/arms/rlms.py --base-url {base_url} --model {model} \\
        --api-key-env {api_key_env} --max-iterations 20 --context-file {context_file} \\
        --question-file {question_file} --output-file {output_file}" ...

Exit status: 0 with an answer; 1 when the library failed (its error on stderr); 2 for
bad arguments or the library missing. `--help` and `--dry-run` work without the
library.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

#: The version the adapter was written against.
RLMS_VERSION = "0.1.3"

INSTALL_HINT = (
    f"install it with scripts/arms/setup-rlms.sh (pip install rlms=={RLMS_VERSION} into "
    "its own venv) and run this script with that venv's python "
    "(scripts/arms/setup-rlms.sh python prints it)"
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Answer one eval item with the official RLM library (rlms "
        f"{RLMS_VERSION}) and write the JSON answer form.",
        epilog=INSTALL_HINT,
    )
    parser.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint ({base_url})")
    parser.add_argument("--model", required=True, help="model name ({model})")
    parser.add_argument(
        "--temperature", type=float, default=None,
        help="sampling temperature for every call the library makes (its sampling_args); "
             "default: the server's",
    )
    parser.add_argument(
        "--timeout", type=float, default=None,
        help="seconds each model request may take (the library's timeout, passed to its "
             "OpenAI client); default: the library's 300. Give rlm's --request-timeout so "
             "that both arms wait as long for a slow server",
    )
    parser.add_argument(
        "--max-iterations", type=int, default=None,
        help="the library's max_iterations (root turns before it is made to answer); "
             "default: the library's 30. `eval --arm rlms` gives rlm's --max-iterations",
    )
    parser.add_argument("--context-file", required=True, help="the item's context ({context_file})")
    question = parser.add_mutually_exclusive_group(required=True)
    question.add_argument("--question", help="the question ({question})")
    question.add_argument("--question-file", help="a file holding the question ({question_file})")
    parser.add_argument(
        "--output-file",
        help="where the JSON answer goes ({output_file}); default: stdout, last line",
    )
    parser.add_argument(
        "--trajectory-file",
        help="where the library's trajectory goes, as JSON: the run's metadata and every "
             "iteration (the model's reply, the code it ran, what that printed), as the "
             "library's RLMLogger captures it; written also when the library fails. "
             "`eval --arm rlms` keeps it beside the answer; default: not kept",
    )
    parser.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="variable holding the API key ({api_key_env}); a local endpoint needs none",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the call that would be made (JSON) and exit, without the library",
    )
    args = parser.parse_args(argv)
    if not args.api_key_env:
        args.api_key_env = "OPENAI_API_KEY"
    return args


def read_inputs(args: argparse.Namespace) -> tuple[str, str]:
    with open(args.context_file, encoding="utf-8") as f:
        context = f.read()
    if args.question_file:
        with open(args.question_file, encoding="utf-8") as f:
            question = f.read().strip()
    else:
        question = args.question
    return context, question


def write_trajectory(path: str, trajectory) -> None:
    """Writes what the library's logger captured (`null` when it captured nothing);
    a failure to write is a warning, never the item's failure."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(trajectory, f, default=str)
            f.write("\n")
    except OSError as error:
        print(f"rlms.py: warning: cannot write the trajectory to {path}: {error}",
              file=sys.stderr)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        context, question = read_inputs(args)
    except OSError as error:
        print(f"rlms.py: cannot read the item: {error}; check --context-file/--question-file",
              file=sys.stderr)
        return 2
    backend_kwargs = {"model_name": args.model, "base_url": args.base_url}
    if args.temperature is not None:
        backend_kwargs["sampling_args"] = {"temperature": args.temperature}
    if args.timeout is not None:
        backend_kwargs["timeout"] = args.timeout
    rlm_kwargs = {}
    if args.max_iterations is not None:
        rlm_kwargs["max_iterations"] = args.max_iterations
    if args.dry_run:
        print(json.dumps({
            "backend": "openai",
            "backend_kwargs": backend_kwargs,
            "rlm_kwargs": rlm_kwargs,
            "api_key_env": args.api_key_env,
            "trajectory_file": args.trajectory_file,
            "context_chars": len(context),
            "root_prompt": question,
        }))
        return 0
    try:
        from rlm import RLM  # the official library (distribution `rlms`)
    except ImportError as error:
        print(f"rlms.py: the official RLM library is not installed for {sys.executable} "
              f"({error}); {INSTALL_HINT}", file=sys.stderr)
        return 2
    try:
        from importlib.metadata import version
        installed = version("rlms")
        if installed != RLMS_VERSION:
            print(f"rlms.py: warning: rlms {installed} is installed; this adapter was written "
                  f"for {RLMS_VERSION}", file=sys.stderr)
    except Exception:  # noqa: BLE001 - only a warning
        pass

    logger = None
    if args.trajectory_file:
        try:
            from rlm.logger import RLMLogger
        except ImportError as error:
            print(f"rlms.py: warning: no trajectory is kept: this rlms has no RLMLogger "
                  f"({error})", file=sys.stderr)
        else:
            logger = RLMLogger()  # in memory; written below, whatever the outcome
            rlm_kwargs["logger"] = logger

    # Any string is accepted by a local endpoint; a hosted one needs the real key.
    api_key = os.environ.get(args.api_key_env) or "no-key"
    rlm = RLM(backend="openai", backend_kwargs={**backend_kwargs, "api_key": api_key}, **rlm_kwargs)
    forced = False
    default_answer = rlm._default_answer  # called when the iterations run out

    def forced_answer(*a, **kw):
        nonlocal forced
        forced = True
        return default_answer(*a, **kw)

    rlm._default_answer = forced_answer
    try:
        result = rlm.completion(context, root_prompt=question)
    except Exception as error:  # noqa: BLE001 - reported, and the item fails
        print(f"rlms.py: the RLM library failed: {type(error).__name__}: {error}",
              file=sys.stderr)
        return 1
    finally:
        # The trajectory first: it is what explains a failure, close() among them.
        if logger is not None:
            write_trajectory(args.trajectory_file, logger.get_trajectory())
        rlm.close()
    usage = result.usage_summary
    answer = {
        "answer": result.response if isinstance(result.response, str) else str(result.response),
        "usage": {
            "prompt_tokens": int(usage.total_input_tokens),
            "completion_tokens": int(usage.total_output_tokens),
        },
        "forced": forced,
    }
    text = json.dumps(answer)
    if args.output_file:
        with open(args.output_file, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The Python package, installed with `pip install .` into a fresh venv, against the
scripted mock model: the binary is on the venv's PATH, `rlm_orchestrate.run` with a
file and with inline context, `RLM(...).completion(...)` in the official library's
call shape (its API key reaching the run through the environment, not argv), and
errors raised with the CLI's message.

Usage (with the venv's python): python test_package.py MOCK_LLM_BIN
"""
import os
import shutil
import sys
import sysconfig
import tempfile

import rlm_orchestrate
from rlm_orchestrate import RLM, RLMError

from mock import MockModel

MOCK = sys.argv[1]

# The wheel put the binary in this environment, and the module finds it there.
installed = os.path.join(sysconfig.get_path("scripts"), "rlm-orchestrate")
assert os.access(installed, os.X_OK), installed
assert rlm_orchestrate.binary() == installed, rlm_orchestrate.binary()
assert shutil.which("rlm-orchestrate", path=os.path.dirname(sys.executable)) == installed

with tempfile.TemporaryDirectory() as tmp:
    data = os.path.join(tmp, "data")
    log = os.path.join(tmp, "app.log")
    with open(log, "w") as f:
        f.write("a ERROR\nb ok\nc ERROR\nd ERROR\n")

    # run() with a file, settings as keywords.
    replies = ["```repl\nn = context.count('ERROR')\nprint(n)\n```", "FINAL_VAR(n)"]
    with MockModel(MOCK, replies) as model:
        result = rlm_orchestrate.run("How many errors?", context_paths=[log], data_dir=data,
                                     base_url=model.base_url, model="mock", max_iterations=5)
        assert result.answer == "3" and result.response == "3", result
        assert result.run_id and not result.forced and result.usage["prompt_tokens"] > 0, result
        assert result.iterations == 2 and result.llm_calls == 2, result

    # run() with inline context (stdin).
    with MockModel(MOCK, ["```repl\nanswer = context.upper()\n```", "FINAL_VAR(answer)"]) as model:
        result = rlm_orchestrate.run("Shout it.", context="quiet words", data_dir=data,
                                     base_url=model.base_url, model="mock")
        assert result.answer == "QUIET WORDS", result

    # The official call shape: the prompt is the context, root_prompt the question.
    replies = ["```repl\nimport os\nkey_in_env = 'sk-test-1234567890' in os.environ.get('OPENAI_API_KEY', 'absent')\nanswer = str(len(context.split()))\nprint(key_in_env)\n```",
               "FINAL_VAR(answer)"]
    with MockModel(MOCK, replies) as model:
        rlm = RLM(backend="openai",
                  backend_kwargs={"model_name": "mock", "base_url": model.base_url,
                                  "api_key": "sk-test-1234567890"},
                  environment="local", max_depth=1, max_iterations=10, data_dir=data)
        completion = rlm.completion("one two three four five", root_prompt="How many words?")
        assert completion.response == "5", completion
        assert completion.root_model == "mock" and completion.run_id, completion
        summary = completion.usage_summary["model_usage_summaries"]["mock"]
        assert summary["total_calls"] == 2 and summary["total_input_tokens"] > 0, completion.usage_summary
        # The key went to the run in its environment; the model's code never sees it.
        requests = model.requests()
        assert "Bearer" not in str(requests), "auth values are never recorded by the mock"
        assert any(q["auth_headers"] for q in requests), "the key reached the model server"
        second = str(requests[1]["body"])
        assert "False" in second and "sk-test-1234567890" not in second, second

    # Errors: the CLI's message, its exit code.
    try:
        rlm_orchestrate.run("q", context_paths=[os.path.join(tmp, "missing.log")], data_dir=data,
                            base_url="http://127.0.0.1:9/v1", model="mock")
    except RLMError as error:
        assert error.exit_code == 2, error.exit_code
        assert "does not exist" in error.message, error.message
    else:
        raise AssertionError("a missing context did not raise")
    try:
        RLM(environment="docker")
    except ValueError as error:
        assert "local" in str(error)
    else:
        raise AssertionError("an unsupported environment was accepted")

print("package: all checks passed")

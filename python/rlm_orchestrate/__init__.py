"""Drive `rlm-orchestrate` from Python — no second implementation.

Two front doors, both running the `rlm-orchestrate` binary this package installs:

    import rlm_orchestrate
    result = rlm_orchestrate.run("Which service failed most?", context_paths=["app.log"],
                                 model="gpt-4o-mini", max_iterations=20)
    print(result.answer, result.run_id, result.usage)

    from rlm_orchestrate import RLM          # the official `rlm` library's call shape
    rlm = RLM(backend="openai", backend_kwargs={"model_name": "gpt-4o-mini"})
    print(rlm.completion(huge_text, root_prompt="Which service failed most?").response)

Settings are the flags of `rlm-orchestrate run` as keywords (`max_llm_calls=50`,
`env="js"`, `agent_cmd="claude -p {prompt}"`, `no_stream=True`); `RLM_*` variables and
`rlm.toml` apply as on the command line. A failed run raises `RLMError` with the
message the CLI prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

__all__ = ["run", "RLM", "RunResult", "RLMChatCompletion", "RLMError", "binary"]

PathLike = Union[str, "os.PathLike[str]"]


class RLMError(RuntimeError):
    """A run that failed: `message` is what `rlm-orchestrate` printed, `exit_code` its
    exit code (1 failure, 2 bad input, 130 cancelled), `stderr` all it printed."""

    def __init__(self, message: str, exit_code: int, stderr: str = ""):
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.stderr = stderr


@dataclass
class RunResult:
    """What a run answered, and what it cost."""

    answer: str
    run_id: str
    forced: bool
    iterations: int
    llm_calls: int
    sub_agents: int
    depth_reached: int
    usage: dict
    cost_usd: Optional[float]
    submitted: Any = None
    raw: dict = field(default_factory=dict, repr=False)

    @property
    def response(self) -> str:
        """The answer (the official library's name for it)."""
        return self.answer


def binary() -> str:
    """The `rlm-orchestrate` executable: `RLM_ORCHESTRATE_BIN`, else the one installed
    beside this package (the environment's scripts directory), else the one on PATH."""
    explicit = os.environ.get("RLM_ORCHESTRATE_BIN")
    if explicit:
        return explicit
    scripts = sysconfig.get_path("scripts")
    if scripts:
        candidate = Path(scripts) / "rlm-orchestrate"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("rlm-orchestrate")
    if found:
        return found
    raise RLMError(
        "rlm-orchestrate is not installed: `pip install .` at the repository root puts it "
        "beside this module, or set RLM_ORCHESTRATE_BIN", 127)


def _flags(settings: Mapping[str, Any]) -> list:
    """`name=value` keywords as `run` flags: True is a switch, a list repeats the flag,
    None and False are left out."""
    args = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                args.extend([flag, str(item)])
        else:
            args.extend([flag, str(value)])
    return args


def run(task: str, context: Optional[str] = None,
        context_paths: Optional[Iterable[PathLike]] = None, *,
        data_dir: Optional[PathLike] = None, env_vars: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None, **settings: Any) -> RunResult:
    """Runs `rlm-orchestrate run TASK` and returns its result.

    `context` is text (sent on stdin and stored in the data directory); `context_paths`
    are files, read where they are (any size, lazily when large). `data_dir` is the
    store (default `./.rlm-data` or `RLM_DATA_DIR`); `env_vars` are added to the
    child's environment (API keys: never put them in a flag). Every other keyword is a
    flag of `run` (`model="gpt-4o-mini"`, `base_url=...`, `max_iterations=20`, ...).
    Raises RLMError when the run fails.
    """
    args = [binary()]
    if data_dir is not None:
        args += ["--data-dir", os.fspath(data_dir)]
    args += ["-q", "run", "--json"]
    for path in context_paths or ():
        args += ["--context", os.fspath(path)]
    if context is not None:
        args += ["--context", "-"]
    args += _flags(settings)
    args += ["--", task]
    env = dict(os.environ)
    env.update(env_vars or {})
    done = subprocess.run(args, input=context if context is not None else None,
                          stdin=None if context is not None else subprocess.DEVNULL,
                          capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RLMError(_message(done.stderr, done.returncode), done.returncode, done.stderr)
    report = json.loads(done.stdout)
    return RunResult(
        answer=report["answer"], run_id=report["run_id"], forced=report["forced"],
        iterations=report["iterations"], llm_calls=report["llm_calls"],
        sub_agents=report["sub_agents"], depth_reached=report["depth_reached"],
        usage=report["usage"], cost_usd=report.get("cost_usd"),
        submitted=report.get("submitted"), raw=report)


def _message(stderr: str, code: int) -> str:
    """The CLI's error lines (`error: …`, `caused by: …`, `hint: …`), or its last line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    wanted = [line for line in lines
              if line.startswith(("error:", "caused by:", "hint:"))]
    if wanted:
        return "\n".join(wanted)
    return lines[-1] if lines else f"rlm-orchestrate exited with code {code}"


# ------------------------------------------------------------- the official shape

_PROVIDERS = {
    "openai": ("openai", None),
    "vllm": ("openai", None),
    "litellm": ("openai", None),
    "openrouter": ("openai", "https://openrouter.ai/api/v1"),
    "portkey": ("openai", "https://api.portkey.ai/v1"),
    "anthropic": ("anthropic", None),
}
_KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
_ENVIRONMENTS = {"local": "python", "python": "python", "js": "js", "tools": "tools", "plan": "plan"}


@dataclass
class RLMChatCompletion:
    """The official library's result: `response`, `usage_summary`, `execution_time`,
    plus `run_id` (its trace: `rlm-orchestrate runs show RUN_ID`) and `forced`."""

    root_model: str
    prompt: Any
    response: str
    usage_summary: dict
    execution_time: float
    run_id: str
    forced: bool
    result: RunResult = field(repr=False)


class RLM:
    """The official `rlm` library's `RLM(...).completion(prompt, root_prompt=None)`,
    run by `rlm-orchestrate`: switching is changing the import.

    `backend` is openai, anthropic, vllm, litellm, openrouter or portkey (the last four
    through the OpenAI-compatible API); `backend_kwargs` takes `model_name`,
    `base_url` and `api_key` (given to the run through its environment, never its
    command line). `environment` is `local` (the Python REPL; also `python`, `js`,
    `tools`). `other_backends`/`other_backend_kwargs` name the sub-model. Any other
    keyword is a flag of `rlm-orchestrate run` (`max_llm_calls=50`, `agent_cmd=...`,
    `data_dir=...`).
    """

    def __init__(self, backend: str = "openai", backend_kwargs: Optional[dict] = None,
                 environment: str = "local", environment_kwargs: Optional[dict] = None,
                 max_depth: int = 1, max_iterations: int = 30,
                 custom_system_prompt: Optional[str] = None,
                 other_backends: Optional[Sequence[str]] = None,
                 other_backend_kwargs: Optional[Sequence[dict]] = None,
                 logger: Any = None, verbose: bool = False,
                 data_dir: Optional[PathLike] = None, **settings: Any):
        if backend not in _PROVIDERS:
            raise ValueError(f"backend {backend!r} is not supported; use one of {sorted(_PROVIDERS)}")
        if environment not in _ENVIRONMENTS:
            raise ValueError(
                f"environment {environment!r} is not supported: rlm runs code in a local REPL "
                "confined by the kernel (Landlock, seccomp) — use 'local' (or 'js', 'tools', 'plan')")
        kwargs = dict(backend_kwargs or {})
        provider, default_url = _PROVIDERS[backend]
        self.root_model = kwargs.get("model_name") or settings.pop("model", None) or "gpt-4o-mini"
        self._env_vars = {}
        self._settings = {
            "provider": provider,
            "model": self.root_model,
            "base_url": kwargs.get("base_url") or default_url,
            "env": _ENVIRONMENTS[environment],
            "max_depth": max_depth,
            "max_iterations": max_iterations,
        }
        if kwargs.get("api_key"):
            self._env_vars[_KEY_VARIABLES[provider]] = kwargs["api_key"]
        if other_backends:
            sub_provider, sub_url = _PROVIDERS.get(other_backends[0], ("openai", None))
            sub = dict((other_backend_kwargs or [{}])[0])
            self._settings["sub_provider"] = sub_provider
            self._settings["sub_model"] = sub.get("model_name")
            self._settings["sub_base_url"] = sub.get("base_url") or sub_url
        self._system_prompt = custom_system_prompt
        self._data_dir = data_dir
        self._verbose = verbose
        self._settings.update(settings)

    def completion(self, prompt: Union[str, dict, list],
                   root_prompt: Optional[str] = None) -> RLMChatCompletion:
        """Answers `prompt` — the (large) input, loaded as `context` in the REPL —
        with `root_prompt`, when given, as the question the root model sees; without
        it the root model is asked to answer the request inside the context."""
        text = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)
        task = root_prompt or (
            "Answer the request given in `context` (the user's prompt is there, not here).")
        settings = dict(self._settings)
        started = time.time()
        with tempfile.TemporaryDirectory() as scratch:
            if self._system_prompt:
                path = Path(scratch) / "system-prompt.txt"
                path.write_text(self._system_prompt)
                settings["system_prompt"] = str(path)
            result = run(task, context=text, data_dir=self._data_dir,
                         env_vars=self._env_vars, **settings)
        usage = {
            "model_usage_summaries": {
                self.root_model: {
                    "total_calls": result.llm_calls,
                    "total_input_tokens": result.usage.get("prompt_tokens", 0),
                    "total_output_tokens": result.usage.get("completion_tokens", 0),
                }
            },
            "total_cost": result.cost_usd,
        }
        return RLMChatCompletion(root_model=self.root_model, prompt=prompt,
                                 response=result.answer, usage_summary=usage,
                                 execution_time=time.time() - started,
                                 run_id=result.run_id, forced=result.forced, result=result)

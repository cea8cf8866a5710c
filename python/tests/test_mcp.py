"""`rlm-orchestrate mcp` driven by the official MCP Python SDK (`mcp` from PyPI):
initialize, list the tools, rlm_run against the scripted mock model (with progress
notifications), the vars_* and runs_* tools, bad input as a tool error (a context path
outside --mcp-root and a base URL the server was not started with included), and a
cancelled call ending its run and the agent process it started.

Usage: python test_mcp.py RLM_ORCHESTRATE_BIN MOCK_LLM_BIN
"""
import asyncio
import json
import os
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mock import MockModel

BIN, MOCK = sys.argv[1], sys.argv[2]
TOOLS = {"rlm_run", "vars_list", "vars_get", "vars_set", "runs_list", "runs_show"}


def server(data_dir, *flags):
    return StdioServerParameters(command=BIN, args=["--data-dir", data_dir, "mcp", *flags],
                                 env={"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")})


def text_of(result):
    return "".join(block.text for block in result.content if getattr(block, "text", None) is not None)


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except OSError:
        return False


async def session_checks(tmp):
    data = os.path.join(tmp, "data")
    log = os.path.join(tmp, "app.log")
    with open(log, "w") as f:
        f.write("ok\nERROR disk full\nok\nERROR disk full\n")
    replies = [
        "```repl\nn = context.count('ERROR')\nprint(n)\n```",
        "FINAL_VAR(n)",
    ]
    with MockModel(MOCK, replies) as model:
        flags = ("--base-url", model.base_url, "--model", "mock", "--mcp-root", tmp)
        async with stdio_client(server(data, *flags)) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                names = {tool.name for tool in (await session.list_tools()).tools}
                assert TOOLS <= names, names

                progress = []

                async def on_progress(value, total, message):
                    progress.append(message)

                result = await session.call_tool(
                    "rlm_run", {"task": "How many ERROR lines?", "context_paths": [log]},
                    progress_callback=on_progress)
                assert not result.is_error, text_of(result)
                assert text_of(result) == "2", text_of(result)
                structured = result.structured_content
                assert structured["answer"] == "2" and structured["forced"] is False, structured
                assert structured["usage"]["total_tokens"] > 0, structured
                run_id = structured["run_id"]
                assert any(m and m.startswith("step 1") for m in progress), progress

                # The prompt named the file, never its lines.
                first = json.dumps(model.requests()[0]["body"])
                assert "disk full" not in first.split("preview")[0], "context leaked into the prompt"

                listed = await session.call_tool("runs_list", {})
                assert run_id in text_of(listed), text_of(listed)
                shown = await session.call_tool("runs_show", {"run_id": run_id})
                assert "context.count('ERROR')" in text_of(shown), text_of(shown)

                stored = await session.call_tool("vars_set", {"key": "note", "value": "hello from mcp"})
                assert not stored.is_error and "note: text" in text_of(stored), text_of(stored)
                got = await session.call_tool("vars_get", {"key": "note"})
                assert text_of(got) == "hello from mcp", text_of(got)
                keys = [v["key"] for v in (await session.call_tool("vars_list", {})).structured_content["items"]]
                assert "note" in keys, keys

                # A value over 1 MiB comes back cut, saying how long it was.
                big = os.path.join(tmp, "big.txt")
                with open(big, "w") as f:
                    f.write("é" * (3 << 20))
                import subprocess
                subprocess.run([BIN, "--data-dir", data, "vars", "set", "big", "--file", big], check=True,
                               capture_output=True)
                cut = text_of(await session.call_tool("vars_get", {"key": "big"}))
                assert len(cut.encode()) < (1 << 20) + 200, len(cut)
                assert cut.startswith("ééé") and "�" not in cut, cut[-200:]
                assert f"of {6 << 20} bytes" in cut, cut[-200:]

                missing = await session.call_tool("vars_get", {"key": "nope"})
                assert missing.is_error and "no variable named" in text_of(missing), text_of(missing)
                empty = await session.call_tool("rlm_run", {"task": "  "})
                assert empty.is_error and "the task is empty" in text_of(empty), text_of(empty)
                bad = await session.call_tool("rlm_run", {"task": "q", "context_paths": ["/nonexistent/x.log"]})
                assert bad.is_error and "does not exist" in text_of(bad), text_of(bad)
                # A file outside --mcp-root, and a base URL the server was not started with.
                outside = await session.call_tool("rlm_run", {"task": "q", "context_paths": [os.path.abspath(BIN)]})
                assert outside.is_error and "--mcp-root" in text_of(outside), text_of(outside)
                elsewhere = await session.call_tool("rlm_run", {"task": "q", "base_url": "http://127.0.0.1:9/v1"})
                assert elsewhere.is_error and "--mcp-allow-base-url" in text_of(elsewhere), text_of(elsewhere)
                inline = await session.call_tool("rlm_run", {"task": "q", "context": "inline text", "env": "nope"})
                assert inline.is_error and "invalid value 'nope'" in text_of(inline), text_of(inline)


async def cancellation_checks(tmp):
    data = os.path.join(tmp, "data2")
    marker = os.path.join(tmp, "agent.pid")
    agent = f"sh -c 'echo $$ > {marker}; exec sleep 60'"
    with MockModel(MOCK, ["```repl\nr = spawn_agent('wait')\n```", "FINAL(late)"]) as model:
        params = server(data, "--base-url", model.base_url, "--model", "mock", "--agent-cmd", agent)
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                call = asyncio.create_task(session.call_tool("rlm_run", {"task": "wait", "context": "x"}))
                deadline = time.time() + 30
                while not (os.path.exists(marker) and open(marker).read().strip()):
                    assert time.time() < deadline, "the agent never started"
                    await asyncio.sleep(0.05)
                pid = int(open(marker).read().strip())
                assert pid_alive(pid)
                call.cancel()  # the SDK sends notifications/cancelled
                try:
                    await call
                except asyncio.CancelledError:
                    pass
                deadline = time.time() + 15
                while pid_alive(pid):
                    assert time.time() < deadline, f"the agent {pid} outlived its cancelled run"
                    await asyncio.sleep(0.05)
                # The session goes on, and the run is recorded as cancelled.
                deadline = time.time() + 15
                while True:
                    runs = (await session.call_tool("runs_list", {})).structured_content["items"]
                    if runs and runs[0]["status"] == "cancelled":
                        break
                    assert time.time() < deadline, runs
                    await asyncio.sleep(0.1)


async def main():
    with tempfile.TemporaryDirectory() as tmp:
        await session_checks(tmp)
        await cancellation_checks(tmp)
    print("mcp: all checks passed")


asyncio.run(main())

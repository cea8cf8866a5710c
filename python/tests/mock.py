"""Starts the repository's scripted stand-in model server (mock-llm) for the Python
tests: it prints its URL on stdout and exits when its stdin closes."""
import json
import os
import subprocess
import tempfile
import urllib.request


class MockModel:
    """mock-llm serving `replies` (and `rules`) on 127.0.0.1; a context manager."""

    def __init__(self, mock_bin, replies, rules=None):
        self._dir = tempfile.TemporaryDirectory()
        script = os.path.join(self._dir.name, "script.json")
        with open(script, "w") as f:
            json.dump({"replies": replies, "rules": rules or []}, f)
        self.proc = subprocess.Popen([mock_bin, "--script", script], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        self.url = line.rsplit(" ", 1)[-1]
        self.base_url = self.url + "/v1"

    def requests(self):
        with urllib.request.urlopen(self.url + "/_mock/requests", timeout=10) as r:
            data = json.load(r)
        return [q for q in data if q["path"].endswith("/chat/completions")]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._dir.cleanup()

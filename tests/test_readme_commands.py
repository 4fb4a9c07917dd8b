"""Every command block of README.md runs as written in a fresh shell.

"Fresh" is what a reader has after ``make demo`` in a new terminal: ``PATH`` without
``~/.local/bin`` (where uv lands), no ``DEBUG``, no ``SECRET_KEY``. The blocks are found by
language (```` ```bash ````, ```` ```sh ````, ```` ```console ````, ```` ```shell ````), so
sections added later are covered without touching this file. A block preceded by
``<!-- readme-test: skip (reason) -->`` is skipped (it needs a service: PostgreSQL, a model
server, a site with your own account). Commands that serve until stopped (``make demo``,
``make serve``, ``runserver``, ``qcluster``) are started, must answer HTTP or print their
listening line, and are then stopped. ``make test`` is not run: it is the suite this file is
part of.

Everything runs in this checkout against a temporary SQLite database and media folder
(``DATABASE_URL``, ``MEDIA_ROOT``), set up by ``make demo-data`` (``make demo`` without the
serving); the site listens on a free port (``PORT``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.readme

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
LANGUAGES = {"bash", "sh", "shell", "console"}
SKIP_MARK = re.compile(r"<!--\s*readme-test:\s*skip\b(.*?)-->", re.S)
# Commands never run, with the reason (kept short on purpose).
NOT_RUN = {
    "make test": "the test suite this test is part of",
    "make test-readme": "this test",
}
SERVING = re.compile(r"^(make (demo|serve)\b|.*\b(runserver|qcluster|demo_serve)\b)")
# A loaded machine may need longer (README_TEST_TIMEOUT_S): `make demo-data` alone took more
# than 300 s on 2 cores shared by several test runs.
COMMAND_TIMEOUT_S = int(os.environ.get("README_TEST_TIMEOUT_S", "300"))
SERVE_TIMEOUT_S = 240
FRESH_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    language: str
    commands: list[str]
    skip_reason: str | None

    @property
    def id(self) -> str:
        return f"README.md:{self.line}"


def _commands(language: str, body: list[str]) -> list[str]:
    """Logical command lines: continuations joined, comment-only lines and output dropped."""
    if language == "console":
        # Only prompted lines are commands; the rest is sample output.
        lines = []
        for raw in body:
            if raw.startswith("$ "):
                lines.append(raw[2:])
            elif lines and lines[-1].endswith("\\"):
                lines.append(raw)
        body = lines
    commands: list[str] = []
    pending = ""
    for raw in body:
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if not line.endswith("\\"):
            commands.append(pending)
            pending = ""
    if pending:
        commands.append(pending)
    return commands


def readme_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^```\s*([\w-]*)\s*$", lines[index])
        if not fence:
            index += 1
            continue
        language = fence.group(1).lower()
        start = index
        end = next((j for j in range(index + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            break
        if language in LANGUAGES:
            before = "\n".join(lines[max(0, start - 3) : start])
            skip = SKIP_MARK.search(before)
            reason = (skip.group(1).strip(" ()") or "marked in the README") if skip else None
            blocks.append(
                Block(start + 1, language, _commands(language, lines[start + 1 : end]), reason)
            )
        index = end + 1
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_command_blocks_and_the_parser_reads_them() -> None:
    assert any(not b.skip_reason for b in BLOCKS)
    sample = readme_blocks(
        "<!-- readme-test: skip (needs redis) -->\n```bash\nredis-cli ping\n```\n"
        '```console\n$ make manage ARGS="a \\\n    b"\noutput line\n```\n'
        "```sh\n# only a comment\necho one  # trailing\n\necho two \\\n  three\n```\n"
        "```python\nprint('not a shell block')\n```\n"
    )
    assert [(b.language, b.skip_reason, b.commands) for b in sample] == [
        ("bash", "needs redis", ["redis-cli ping"]),
        ("console", None, ['make manage ARGS="a \\\n    b"']),
        ("sh", None, ["echo one  # trailing", "echo two \\\n  three"]),
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A new terminal's environment, pointed at a temporary database set up like the demo."""
    base = tmp_path_factory.mktemp("readme")
    path = FRESH_PATH
    uv = shutil.which("uv")
    home = os.environ.get("HOME", str(Path.home()))
    if uv and Path(uv).parent != Path(home) / ".local" / "bin":
        # uv installed somewhere the Makefile does not look (a CI image): the reader's machine
        # would have it on PATH. ~/.local/bin itself is never added: that is what is tested.
        path = f"{path}:{Path(uv).parent}"
    env = {
        "PATH": path,
        "HOME": home,
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "DATABASE_URL": f"sqlite:///{base / 'db.sqlite3'}",
        "MEDIA_ROOT": str(base / "media"),
        "PORT": str(_free_port()),
    }
    # The demo keeps its admin password per database under .cache/demo-admin/: remove the
    # temporary database's file afterwards, never the reader's own.
    passwords = ROOT / ".cache" / "demo-admin"
    before = set(passwords.glob("*.txt"))
    setup = subprocess.run(
        ["make", "demo-data"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert setup.returncode == 0, f"make demo-data failed:\n{setup.stdout}\n{setup.stderr}"
    # The demo's output explains its expected skips instead of leaving them unexplained.
    skipped = [line for line in setup.stdout.splitlines() if line.lstrip().startswith("skipped")]
    assert skipped and all("expected" in line for line in skipped), skipped
    assert "with password:" in setup.stdout
    yield env
    for created in set(passwords.glob("*.txt")) - before:
        created.unlink(missing_ok=True)


def _run(command: str, env: dict[str, str], exports: list[str]) -> str:
    script = "\n".join(["set -o pipefail", *exports, command])
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"exit status {done.returncode} from:\n{command}\n--- stdout\n{done.stdout[-4000:]}"
        f"\n--- stderr\n{done.stderr[-4000:]}"
    )
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    return done.stdout


def _serve(command: str, env: dict[str, str], exports: list[str]) -> None:
    """Start a serving command, wait until the site answers, then stop its process group."""
    script = "\n".join([*exports, command])
    process = subprocess.Popen(
        ["bash", "-c", script],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: output.extend(process.stdout or []), daemon=True)
    reader.start()
    url = f"http://127.0.0.1:{env['PORT']}/"
    answered = False
    deadline = time.monotonic() + SERVE_TIMEOUT_S
    try:
        while time.monotonic() < deadline and process.poll() is None:
            text = "".join(output)
            if "qcluster" in command and "runserver" not in command:
                answered = bool(re.search(r"Q Cluster .* (starting|running)", text, re.I))
            else:
                try:
                    with urllib.request.urlopen(url, timeout=5) as response:
                        answered = response.status == 200
                except OSError:
                    answered = False
            if answered:
                break
            time.sleep(1)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        reader.join(timeout=5)
    text = "".join(output)
    assert answered, f"{command!r} did not start serving:\n{text[-4000:]}"
    assert "Traceback" not in text, text[-4000:]
    if command.startswith("make "):
        # make demo and make serve print the admin password again next to the address.
        assert re.search(r"Admin: user '\w+', password \S+", text), text[-4000:]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_readme_block_runs_in_a_fresh_shell(block: Block, fresh_env: dict[str, str]) -> None:
    if block.skip_reason:
        pytest.skip(block.skip_reason)
    exports: list[str] = []
    ran = 0
    for command in block.commands:
        first = command.strip()
        if first in NOT_RUN or first.split("#")[0].strip() in NOT_RUN:
            continue
        if SERVING.match(first):
            _serve(command, fresh_env, exports)
        else:
            _run(command, fresh_env, exports)
        if re.match(r"^(export\s|\w+=\S*$)", first):
            exports.append(command)  # later commands of the block see what it set
        ran += 1
    if not ran:
        pytest.skip("every command of the block is in the not-run list")


def _any_judge_question(body: dict[str, Any]) -> dict[str, Any]:
    """A fake OpenAI-compatible model: the check's probe call, audit verdicts, checklist answers."""
    from tests.benchmarks_app.audit.conftest import fake_verdict
    from tests.scoring.judges.fake_openai import completion

    if len(body["messages"]) == 1:
        return completion(json.dumps({"ok": True}), tokens_in=5, tokens_out=4)
    if "<verified_finding>" in body["messages"][-1]["content"]:
        return fake_verdict(body)
    return completion(json.dumps({"correct": True, "feedback": "Consistent with the paper."}))


def test_the_local_model_block_runs_twice_in_a_row(
    fresh_env: dict[str, str], tmp_path: Path
) -> None:
    """The block of "Judging with a local model", as written, twice in a fresh shell (issue 37
    item 7): only ``.ci/llama_server.sh`` is replaced, by a stand-in that answers with a fake
    OpenAI-compatible server's URL, so no llama-server is built (``make test-real-llm`` runs
    the real one). The second pass must not stop at ``judge_add``'s existing name."""
    from tests.scoring.judges.fake_openai import FakeOpenAI

    block = next(b for b in BLOCKS if any("judge_add smollm" in c for c in b.commands))
    assert block.skip_reason  # the generic test would build llama-server
    assert all(".ci/llama_server.sh" in c or c.startswith("make manage") for c in block.commands)
    calls = tmp_path / "server-calls"
    with FakeOpenAI(_any_judge_question) as server:
        stand_in = tmp_path / "llama_server.sh"
        stand_in.write_text(
            f'echo "$1" >> {calls}\n'
            f'case "$1" in start|url) echo {server.base_url} ;; stop) ;; *) exit 2 ;; esac\n'
        )
        outputs: list[str] = []
        for _ in range(2):
            lines = [
                _run(command.replace(".ci/llama_server.sh", str(stand_in)), fresh_env, [])
                for command in block.commands
            ]
            outputs.append("\n".join(lines))
    assert calls.read_text().split() == ["start", "url", "stop"] * 2
    for printed in outputs:
        assert "Judge record 'smollm' (openai) saved." in printed
        assert re.search(r"Run #\d+ succeeded \(judge smollm\)", printed), printed[-3000:]
        assert len(re.findall(r"Run #\d+ succeeded", printed)) == 2, printed[-3000:]
    # Both passes asked the server: the audit's verified findings and the paper's questions.
    prompts = [r["messages"][-1]["content"] for r in server.requests if len(r["messages"]) > 1]
    assert any("<verified_finding>" in p for p in prompts)
    assert any("<verified_finding>" not in p for p in prompts)

"""Hostile bundles against the offline reader (``python -m scoring.bundles``): each ends in
exit 2 with one line naming its member, within 5 s of CPU and 300 MB, in a process of its own
(the reader's bounds are what a stranger's file meets; the process is measured, not timed
in the test)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from scoring import bundles
from tests.scoring.hostile_bundles import HOSTILE, base_bundle

ROOT = Path(__file__).resolve().parents[2]
MAX_CPU_S = 5.0
MAX_RSS_MB = 300


# The reader's peak memory is read from its own /proc/self/status (VmHWM, the peak of the
# address space exec gave it) as it exits: the rusage of a process started by posix_spawn
# carries the parent's peak across exec (Linux keeps the old mm's high-water mark), so under
# a pytest worker of a few hundred MB it would measure the worker, not the reader.
_SHIM = (
    "import atexit, os, runpy, sys\n"
    "def _peak():\n"
    "    with open('/proc/self/status') as status, open(os.environ['READER_PEAK'], 'w') as out:\n"
    "        out.write(next(l for l in status if l.startswith('VmHWM:')).split()[1])\n"
    "atexit.register(_peak)\n"
    "sys.argv = ['scoring.bundles', *sys.argv[1:]]\n"
    "runpy.run_module('scoring.bundles', run_name='__main__', alter_sys=True)\n"
)


def _measured(path: Path) -> tuple[int, str, float, float]:
    peak = path.with_suffix(".peak")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "READER_PEAK": str(peak)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    err = path.with_suffix(".err")
    with err.open("wb") as stderr, open(os.devnull, "wb") as stdout:
        pid = os.posix_spawn(
            sys.executable,
            [sys.executable, "-c", _SHIM, str(path)],
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, stdout.fileno(), 1),
                (os.POSIX_SPAWN_DUP2, stderr.fileno(), 2),
            ],
        )
        _, status, usage = os.wait4(pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    return os.waitstatus_to_exitcode(status), err.read_text(), cpu, int(peak.read_text()) / 1024


def test_the_base_bundle_reads(tmp_path: Path) -> None:
    # The hostile ones below are this bundle with one thing changed.
    path = tmp_path / "base.zip"
    path.write_bytes(base_bundle())
    bundle = bundles.read_bundle_file(path)
    assert bundle.tampered == () and bundles.verify(bundle) == []


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_bundle_ends_in_exit_2_naming_its_member(kind: str, tmp_path: Path) -> None:
    build, named = HOSTILE[kind]
    path = tmp_path / "hostile.zip"
    path.write_bytes(build())
    code, stderr, cpu_s, rss_mb = _measured(path)
    lines = stderr.strip().splitlines()
    assert code == 2, stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], stderr
    assert "Traceback" not in stderr
    assert cpu_s < MAX_CPU_S, f"{kind}: {cpu_s:.1f} s of CPU"
    assert rss_mb < MAX_RSS_MB, f"{kind}: {rss_mb:.0f} MB"

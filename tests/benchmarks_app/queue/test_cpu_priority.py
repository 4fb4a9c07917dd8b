"""``Q_NICE`` must reach the kernel's scheduler where it shares the CPU by session first.

Each case runs in a child process, since a niceness, once raised, cannot be lowered again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks_app.cpu_priority import autogroup_enabled

ROOT = Path(__file__).resolve().parents[3]

PROBE = """
import json, os
from benchmarks_app.cpu_priority import cpu_priority_lower, session_group_nice
before = {"nice": os.nice(0), "group": session_group_nice()}
lowered = cpu_priority_lower(by=5)
print(json.dumps({
    "before": before,
    "nice": lowered.nice,
    "lowered_group": lowered.session_group_nice,
    "group_after": session_group_nice(),
    "why_not_group": lowered.why_not_group,
}))
"""


def _lowered(*, own_session: bool) -> dict[str, object]:
    """Lower a fresh child's priority by 5; its niceness must follow (skipped past that on a
    kernel without autogroup: there is no session group to look at)."""
    answer = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        # Only what it needs: a setting another test left in this worker's environment must
        # not decide how the probe starts.
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=own_session,
    )
    assert answer.returncode == 0, f"the probe failed ({answer.returncode}): {answer.stderr}"
    seen: dict[str, object] = json.loads(answer.stdout.strip().splitlines()[-1])
    before = seen["before"]
    assert isinstance(before, dict)
    assert seen["nice"] == min(19, before["nice"] + 5)
    if not autogroup_enabled():
        pytest.skip("this kernel does not group the CPU by session (no autogroup)")
    return seen


def test_a_session_leader_lowers_its_process_and_its_session_group() -> None:
    seen = _lowered(own_session=True)
    # The group's niceness is what orders the cluster against gunicorn's session.
    assert seen["lowered_group"] == seen["nice"]
    assert seen["group_after"] == seen["nice"]


def test_a_process_inside_a_shells_session_leaves_the_group_alone() -> None:
    seen = _lowered(own_session=False)
    before = seen["before"]
    assert isinstance(before, dict)
    # Lowering the group would slow the caller's whole session (here: pytest) for good.
    assert seen["lowered_group"] is None
    assert seen["group_after"] == before["group"]
    assert "does not lead its session" in str(seen["why_not_group"])

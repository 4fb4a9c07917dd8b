"""Lowering a process's CPU priority so that it yields to the web on a shared machine.

``os.nice`` alone does not do it on most Linux desktops and many servers: with the kernel's
autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, on by default in Debian's
and Ubuntu's kernels) the CPU is shared first between *sessions*, each an equal group, and a
process's niceness only orders it against the processes of its own session. A ``qcluster``
started in a session of its own (a service manager's unit, ``setsid``, the rush bench) at
``Q_NICE=10`` then still took an equal share against gunicorn's session: in the rush on 2 CPUs
the two clusters held a whole core while the pages queued (measured with per-process CPU
samples, 2026-12-07).

So the niceness is also given to the session's group (``/proc/self/autogroup``) when this
process leads its session, and so owns the group with its own children only. A process that
does not lead its session (started from a shell) leaves the group alone: the group is the
shell's, and lowering it would slow everything else started there, for as long as the
terminal lives. It is told so in its log instead.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

AUTOGROUP = Path("/proc/self/autogroup")
AUTOGROUP_SWITCH = Path("/proc/sys/kernel/sched_autogroup_enabled")


@dataclass(frozen=True)
class PriorityLowered:
    """What was lowered: the process's niceness, and the session group's when it applies."""

    nice: int
    session_group_nice: int | None
    why_not_group: str = ""


def autogroup_enabled() -> bool:
    try:
        return AUTOGROUP_SWITCH.read_text().strip() == "1" and AUTOGROUP.exists()
    except OSError:
        return False


def cpu_priority_lower(*, by: int) -> PriorityLowered:
    """Add ``by`` to this process's niceness (children forked later inherit it) and, under
    autogroup scheduling, to its session's group when this process leads the session."""
    if by <= 0:
        return PriorityLowered(nice=os.nice(0), session_group_nice=None)
    nice = os.nice(by)  # the kernel caps it at 19
    if not autogroup_enabled():
        return PriorityLowered(nice=nice, session_group_nice=None, why_not_group="no autogroup")
    try:
        leads_session = os.getsid(0) == os.getpid()
    except OSError:  # a sandbox that hides sessions: nothing to decide by
        leads_session = False
    if not leads_session:
        why = (
            "this process does not lead its session: under the kernel's autogroup scheduling "
            "its niceness orders it only against its own session's processes; start it in a "
            "session of its own (a service manager's unit, or setsid) for the web to come first"
        )
        logger.warning("CPU priority: %s", why)
        return PriorityLowered(nice=nice, session_group_nice=None, why_not_group=why)
    try:
        AUTOGROUP.write_text(f"{nice}\n")
    except OSError as exc:  # read-only /proc in some containers: the niceness still holds
        logger.warning("CPU priority: could not lower the session group's: %s", exc)
        return PriorityLowered(nice=nice, session_group_nice=None, why_not_group=str(exc))
    return PriorityLowered(nice=nice, session_group_nice=nice)


def session_group_nice() -> int | None:
    """The niceness of this process's session group (``None`` without autogroup)."""
    try:
        text = AUTOGROUP.read_text()  # "/autogroup-85 nice 0"
        return int(text.rsplit("nice", 1)[1])
    except (OSError, IndexError, ValueError):  # no autogroup, or a kernel that words it otherwise
        return None

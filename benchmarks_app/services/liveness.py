"""Liveness of a ``qcluster`` process, for a service manager or a Kubernetes probe.

``qcluster`` touches :func:`liveness_file` every second while its sentinel (which keeps the
workers) and its sweeper thread live; ``manage.py qcluster_alive`` reads how old it is.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from django.conf import settings

# A cluster whose file is older than this is not alive (it touches it every second).
DEFAULT_MAX_AGE_S = 30.0


def liveness_file() -> Path:
    configured = str(getattr(settings, "Q_LIVENESS_FILE", "") or "")
    if configured:
        return Path(configured)
    name = str(settings.Q_CLUSTER.get("name", "evalplatform"))
    return Path(tempfile.gettempdir()) / f"{name}-qcluster.alive"


def liveness_problem(
    *, max_age_s: float = DEFAULT_MAX_AGE_S, path: Path | None = None
) -> str | None:
    """None when the cluster touched its file within ``max_age_s``; else one line why not."""
    path = path or liveness_file()
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return f"no qcluster has started here ({path} is missing)"
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if age > max_age_s:
        return f"the qcluster's sentinel or sweeper stopped {age:.0f} s ago ({path})"
    return None

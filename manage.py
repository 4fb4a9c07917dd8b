#!/usr/bin/env python
"""Django's command-line utility for administrative tasks.

A configuration error (a missing ``SECRET_KEY``, a malformed variable, a setting Django
rejects) is printed as one line, ``error: …``, with exit status 2: the message already names
the variable and the fix, and a traceback through the settings module only hides it.
``--traceback`` (Django's own flag) keeps the traceback.
"""

from __future__ import annotations

import gc
import os
import sys

CONFIG_ERROR_STATUS = 2


def _config_error(exc: BaseException) -> BaseException | None:
    """The configuration error behind ``exc`` (itself or one it was raised from), if any."""
    from django.core.exceptions import ImproperlyConfigured

    from config.env import ImproperlyConfiguredEnv

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ImproperlyConfiguredEnv | ImproperlyConfigured):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(argv)
    except Exception as exc:
        error = _config_error(exc)
        if error is None or "--traceback" in argv:
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"error: {message}", file=sys.stderr)
        sys.exit(CONFIG_ERROR_STATUS)


if __name__ == "__main__":
    main()
    # The process ends here: its last collection would walk every object Django and the
    # command loaded (0.3-0.5 s after a run) to free memory the system takes back anyway.
    gc.freeze()

"""The request kinds of the rush bench and the p95 each is held to (issue 35's goal).

Apart from the Locust file, which only Locust imports (it patches the standard library with
gevent on import), so that the bench and the tests read the same table.
"""

from __future__ import annotations

# Request kind -> p95 goal in ms; None: reported, not held to a goal (logins hash a password,
# uploads read papers and files: their cost is the sender's).
GOALS: dict[str, int | None] = {
    "board page": 200,
    "board API": 200,
    "page": 500,
    "API read": 500,
    "run page": 500,
    "run status": 500,
    "API run poll": 500,
    "bundle download": 500,
    "login": None,
    "submit audit": None,
    "submit probes": None,
    "submit paper": None,
    "hostile upload": None,
}

# The kinds whose requests read a participant's file (a paper, a results file): the only ones
# the site may answer "busy" (503 with Retry-After, its reader caps full). Elsewhere a 503 is
# an error like any 5xx.
READS_FILES: frozenset[str] = frozenset(
    {"submit audit", "submit probes", "submit paper", "hostile upload"}
)

# The kinds whose unanswered requests are refusals, not failures: a hostile account sends large
# files back to back, and an upload the site refuses before reading its body (the API
# throttle, once the account's requests are over it) is answered 429 while the client is still
# sending; gunicorn then drains at most 64 KiB of the unread body and closes the connection,
# which the sender sees as a reset. Shown in the table ("no ans"), not held to the goal.
CLOSED_IS_REFUSAL: frozenset[str] = frozenset({"hostile upload"})

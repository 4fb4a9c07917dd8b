"""Settings for the evaluation platform: one file, driven by environment variables.

Every variable is listed in the README's configuration table.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from csp.constants import NONE, SELF

from config import env as envparse

BASE_DIR = Path(__file__).resolve().parent.parent
ENV = os.environ

DEBUG = envparse.env_bool(ENV, "DEBUG", False)
SECRET_KEY = envparse.secret_key(ENV, debug=DEBUG, key_file=BASE_DIR / ".dev-secret-key")
ALLOWED_HOSTS = envparse.env_list(ENV, "ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = envparse.env_list(ENV, "CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # Django's admin with the index grouped by benchmark (benchmarks_app.apps).
    "benchmarks_app.apps.GroupedAdminConfig",
    "django.contrib.auth",
    "axes",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    # Before django_q: its `qcluster` command is replaced by one that stops on SIGTERM.
    "benchmarks_app",
    "django_q",
    "simple_history",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # An API client refused for its rate is refused again here, before sessions,
    # authentication and the view, until its wait is over.
    "benchmarks_app.refused_senders.RefusedSenderMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Records who made an admin change in the truth, rule and question histories.
    "simple_history.middleware.HistoryRequestMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    # A NUL in the path or a query parameter is a 400 naming it, never a database error.
    "benchmarks_app.request_checks.InvalidCharactersMiddleware",
    # A paper read refused for load (all reader slots taken) answers 503/429, not 500.
    "benchmarks_app.views.busy.PaperReadRefusedMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {"default": envparse.database(ENV, BASE_DIR)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"

# Login lockout (django-axes): the login form, the admin login and POST /api/auth/token/.
# Its counts are rows of the database (the database handler, named here so that it stays so),
# shared by every process and kept across restarts.
# After AXES_FAILURE_LIMIT wrong passwords for one username from one IP address, that pair
# is refused (429) for AXES_COOLOFF_MINUTES; a successful login clears the count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = envparse.env_int(ENV, "AXES_FAILURE_LIMIT", 10, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=envparse.env_int(ENV, "AXES_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "benchmarks_app.views.lockout.lockout_response"
# The client's address, for the lockout, the API throttles and the mail limits alike: the
# NUM_PROXIES-th entry from the right of X-Forwarded-For, or REMOTE_ADDR when 0 (no proxy is
# trusted: any client can send the header).
NUM_PROXIES = envparse.env_int(ENV, "NUM_PROXIES", 0, minimum=0)
AXES_CLIENT_IP_CALLABLE = "benchmarks_app.client_address.client_address"
# Password-reset and sign-up e-mails: at most this many per address and per client address
# per hour; further requests get the same answer and send nothing.
ACCOUNT_MAILS_PER_ADDRESS_HOUR = envparse.env_int(
    ENV, "ACCOUNT_MAILS_PER_ADDRESS_HOUR", 3, minimum=1
)
ACCOUNT_MAILS_PER_CLIENT_HOUR = envparse.env_int(
    ENV, "ACCOUNT_MAILS_PER_CLIENT_HOUR", 10, minimum=1
)
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Production hardening: on by default outside DEBUG; SECURE_SSL_REDIRECT and HSTS are opt-in
# because TLS is often terminated by a proxy (set SECURE_PROXY_SSL_HEADER_FORWARDED_PROTO=1).
SESSION_COOKIE_SECURE = envparse.env_bool(ENV, "SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = envparse.env_bool(ENV, "CSRF_COOKIE_SECURE", not DEBUG)
SECURE_SSL_REDIRECT = envparse.env_bool(ENV, "SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = envparse.env_int(ENV, "SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# Content-Security-Policy (django-csp) on every answer: scripts and style sheets only from this
# site's files (none inline, no eval), so injected markup cannot run. Style *attributes* stay
# allowed: progress bars and chart swatches set their width and colour with them, and a style
# attribute cannot run script. Images may be data: URIs (the favicon, Swagger UI's icons).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
if envparse.env_bool(ENV, "SECURE_PROXY_SSL_HEADER_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

STATIC_URL = "static/"
STATIC_ROOT = Path(ENV.get("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
MEDIA_URL = "media/"
MEDIA_ROOT = Path(ENV.get("MEDIA_ROOT", str(BASE_DIR / "media")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = DEBUG
# What a public run bundle carries of a participant's inputs, per benchmark, where the run's
# phase does not say (Phase.bundle_inputs): "shown" (what the public pages show), "all",
# "after_end" (all once the phase ends) or "never". The run's owner and staff get all of it.
RUN_BUNDLE_INPUTS = {
    benchmark: ENV.get(f"RUN_BUNDLE_INPUTS_{benchmark.upper()}", "shown")
    for benchmark in ("audit", "probes", "checklist")
}
# Where an ended run's bundles are kept once built (in the default storage), so that a
# download reads the file instead of building it again.
RUN_BUNDLE_STORAGE_PREFIX = "run-bundles"

# Uploads: papers and result files. Larger requests are refused with a clear error.
UPLOAD_MAX_MB = envparse.env_int(ENV, "UPLOAD_MAX_MB", 20, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = UPLOAD_MAX_MB * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# The longest field of an uploaded finding or probe response, in characters: a title, a
# reference (id, location, file, type, label) and any other free text (description, output);
# longer is refused, naming the finding or line and the field, before any record is built.
UPLOAD_MAX_TITLE_CHARS = envparse.env_int(ENV, "UPLOAD_MAX_TITLE_CHARS", 1_000, minimum=1)
UPLOAD_MAX_REF_CHARS = envparse.env_int(ENV, "UPLOAD_MAX_REF_CHARS", 2_000, minimum=1)
UPLOAD_MAX_TEXT_CHARS = envparse.env_int(ENV, "UPLOAD_MAX_TEXT_CHARS", 50_000, minimum=1)
# A probe responses file is read up to (the suite's probes + this) rows, then refused.
PROBE_RESPONSES_EXTRA_ROWS = envparse.env_int(ENV, "PROBE_RESPONSES_EXTRA_ROWS", 10, minimum=0)

# Queue (django-q2): ORM broker by default, Redis when REDIS_URL is set.
Q_CLUSTER = envparse.q_cluster(ENV)
# Caches: "default" is shared by every process (Redis with REDIS_URL, else the database); see
# config.env.caches for which cache holds what.
CACHES = envparse.caches(ENV)

# Judges: offline (deterministic, no network) unless an API key is configured.
OPENAI_API_KEY = ENV.get("OPENAI_API_KEY", "")
OPENAI_BASE_URL = ENV.get("OPENAI_BASE_URL", "") or None
JUDGE_DEFAULT = ENV.get("JUDGE_DEFAULT", "openai" if OPENAI_API_KEY else "offline")
JUDGE_MODELS = envparse.env_list(ENV, "JUDGE_MODELS", ["o4-mini"])
JUDGE_MODEL = JUDGE_MODELS[0] if JUDGE_MODELS else "o4-mini"
JUDGE_ITERATIONS = envparse.env_int(ENV, "JUDGE_ITERATIONS", 3, minimum=1)
JUDGE_BATCH_SIZE = envparse.env_int(ENV, "JUDGE_BATCH_SIZE", 10, minimum=1)
JUDGE_TIMEOUT_S = envparse.env_float(ENV, "JUDGE_TIMEOUT_S", 120.0)
JUDGE_MAX_RETRIES = envparse.env_int(ENV, "JUDGE_MAX_RETRIES", 4, minimum=0)
JUDGE_CONCURRENCY = envparse.env_int(ENV, "JUDGE_CONCURRENCY", 4, minimum=1)
JUDGE_RPM = envparse.env_int(ENV, "JUDGE_RPM", 0, minimum=0)
JUDGE_TPM = envparse.env_int(ENV, "JUDGE_TPM", 0, minimum=0)
JUDGE_JSON_MODE = envparse.env_bool(ENV, "JUDGE_JSON_MODE", False)
# Bound on every judge answer; reasoning models spend hidden reasoning from the same budget.
JUDGE_MAX_ANSWER_TOKENS = envparse.env_int(ENV, "JUDGE_MAX_ANSWER_TOKENS", 4096, minimum=16)
# Not sent unless set: some models accept only their default temperature.
JUDGE_TEMPERATURE: float | None = (
    envparse.env_float(ENV, "JUDGE_TEMPERATURE", 0.0) if ENV.get("JUDGE_TEMPERATURE") else None
)
# Vote n is sent seed JUDGE_SEED + n where the server accepts a seed; "none" sends none.
JUDGE_SEED: int | None = (
    None
    if ENV.get("JUDGE_SEED", "").strip().lower() == "none"
    else envparse.env_int(ENV, "JUDGE_SEED", 0, minimum=0)
)
# One small call when a run starts finds the response format and options the server takes.
JUDGE_PROBE = envparse.env_bool(ENV, "JUDGE_PROBE", True)
JUDGE_BACKOFF_BASE_S = envparse.env_float(ENV, "JUDGE_BACKOFF_BASE_S", 1.0)
JUDGE_BACKOFF_MAX_S = envparse.env_float(ENV, "JUDGE_BACKOFF_MAX_S", 30.0)
# A judge that keeps failing with transient errors (outage, 5xx, timeouts, rate limits) is
# waited for this long, one probe call at a time, before its run pauses as "waiting for judge".
JUDGE_OUTAGE_PATIENCE_S = envparse.env_float(ENV, "JUDGE_OUTAGE_PATIENCE_S", 300.0)
# Stream judge answers, so that a request given up on (timeout) stops on the server too.
JUDGE_STREAM = envparse.env_bool(ENV, "JUDGE_STREAM", True)
# On a llama.cpp server with several slots, send calls that open alike to one slot (id_slot),
# so its prompt cache serves their shared part (scoring/judges/slots.py).
JUDGE_PIN_SLOTS = envparse.env_bool(ENV, "JUDGE_PIN_SLOTS", True)
# Prices in dollars per million tokens; where set, runs show an estimated cost of their calls.
JUDGE_PRICE_IN_PER_MTOK = envparse.env_float(ENV, "JUDGE_PRICE_IN_PER_MTOK", 0.0)
JUDGE_PRICE_OUT_PER_MTOK = envparse.env_float(ENV, "JUDGE_PRICE_OUT_PER_MTOK", 0.0)
# Input tokens the server read from its prompt cache; unset: half the input price (what OpenAI
# bills at most for cached input, scoring.judges.usage.CACHED_INPUT_SHARE).
JUDGE_PRICE_CACHED_IN_PER_MTOK: float | None = (
    envparse.env_float(ENV, "JUDGE_PRICE_CACHED_IN_PER_MTOK", 0.0)
    if (ENV.get("JUDGE_PRICE_CACHED_IN_PER_MTOK") or "").strip()
    else None
)
# Judges' agreement with curated verdicts: a board says so where its judge has fewer curated
# comparisons than this, or a kappa below JUDGE_AGREEMENT_MIN_KAPPA (0.6: the lower end of
# "substantial" agreement in Landis & Koch's conventional scale, not fitted to any data).
JUDGE_AGREEMENT_MIN_CURATED = envparse.env_int(ENV, "JUDGE_AGREEMENT_MIN_CURATED", 30, minimum=1)
JUDGE_AGREEMENT_MIN_KAPPA = envparse.env_float(ENV, "JUDGE_AGREEMENT_MIN_KAPPA", 0.6)
# A board's judge agreement (a bootstrap interval) is computed again at most this often while
# only its rows change (runs ending); a new curated verdict recomputes it at once. In a
# deadline rush a board changes with every run that ends, and a web worker spent its time on
# the bootstrap, one board state after another (issue 35).
JUDGE_AGREEMENT_REFRESH_S = envparse.env_float(ENV, "JUDGE_AGREEMENT_REFRESH_S", 30.0)
# The review queue shows every contested judgement, and this share of the others (picked by a
# hash of the item and JUDGE_REVIEW_SEED, so the sample is the same on every page load).
JUDGE_REVIEW_SAMPLE_RATE = envparse.env_float(ENV, "JUDGE_REVIEW_SAMPLE_RATE", 0.05)
JUDGE_REVIEW_SEED = envparse.env_int(ENV, "JUDGE_REVIEW_SEED", 0, minimum=0)
# Run leases: a worker renews its piece's lease every RUN_LEASE_S / 3 seconds; the sweeper
# (a django-q2 schedule every RUN_SWEEP_S seconds, rounded to whole minutes) re-queues pieces
# whose lease expired and queued pieces whose task has been lost, so a dead worker's run
# resumes by itself within about RUN_LEASE_S + RUN_SWEEP_S.
RUN_LEASE_S = envparse.env_int(ENV, "RUN_LEASE_S", 60, minimum=3)
RUN_SWEEP_S = envparse.env_int(ENV, "RUN_SWEEP_S", 60, minimum=1)
# A queued piece not picked up this long after its task was sent, and whose task is no longer
# waiting in the broker, is sent again (a second delivery is harmless: the claim refuses it).
RUN_PICKUP_GRACE_S = envparse.env_int(ENV, "RUN_PICKUP_GRACE_S", 30, minimum=1)
# A judge request unanswered this long is named on the run's pages (before the breaker opens).
RUN_JUDGE_QUIET_AFTER_S = envparse.env_int(ENV, "RUN_JUDGE_QUIET_AFTER_S", 10, minimum=1)
# A process that takes a piece of a run (a queue worker's task, or --wait with no worker)
# claims up to this many queued pieces of that run and drives them side by side, sharing
# JUDGE_CONCURRENCY; the others stay free for other workers.
RUN_PIECES_PER_PROCESS = envparse.env_int(ENV, "RUN_PIECES_PER_PROCESS", 16, minimum=1)
# How many qcluster processes share the database, and the connections the web processes
# hold (gunicorn workers x threads): the start-up check of PostgreSQL's max_connections.
Q_CLUSTERS = envparse.env_int(ENV, "Q_CLUSTERS", 1, minimum=1)
# Added to a qcluster's niceness (0-19) at start, its workers included: on a machine that
# also serves the site, 10 lets the pages take the CPU before the judging (issue 35's rush);
# 0 (the default) leaves it, as on worker machines of their own.
Q_NICE = envparse.env_int(ENV, "Q_NICE", 0, minimum=0)
WEB_DB_CONNECTIONS = envparse.env_int(ENV, "WEB_DB_CONNECTIONS", 0, minimum=0)
# A worker host whose clock is further than this from the database's logs a warning (leases
# use the database's clock; /health/, /metrics and the admin show every host's skew).
CLOCK_SKEW_WARN_S = envparse.env_float(ENV, "CLOCK_SKEW_WARN_S", 5.0)
# Processes a `--wait` command with no worker processes a run's pieces in (as a default cluster's
# two workers: one Python process keeps one core busy).
RUN_PROCESSES_HERE = envparse.env_int(ENV, "RUN_PROCESSES_HERE", 2, minimum=1)
# How often a piece's worker looks whether its run was cancelled (it then stops between
# judge calls and abandons the calls in flight).
RUN_CANCEL_POLL_S = envparse.env_float(ENV, "RUN_CANCEL_POLL_S", 1.0)
# A piece handed out again this many times after its worker died (expired lease) or lost
# its database connection fails with that cause instead of looping forever.
RUN_PIECE_MAX_REQUEUES = envparse.env_int(ENV, "RUN_PIECE_MAX_REQUEUES", 10, minimum=1)
# A piece paused while the judge was down is parked (its worker freed) and retried this long
# later, doubling per pause in a row up to 10 minutes.
RUN_PARK_RETRY_S = envparse.env_int(ENV, "RUN_PARK_RETRY_S", 60, minimum=1)
# An active run with no progress this long is flagged as stuck on its page and in the admin.
RUN_STUCK_AFTER_S = envparse.env_int(ENV, "RUN_STUCK_AFTER_S", 1800, minimum=60)
# /health/ and /metrics give up on the database after this long (connect, statement, a
# server that stops answering), and answer 503.
HEALTH_DB_TIMEOUT_S = envparse.env_int(ENV, "HEALTH_DB_TIMEOUT_S", 2, minimum=1)
# /metrics (Prometheus): staff, or a request with "Authorization: Bearer <METRICS_TOKEN>";
# empty: staff only.
METRICS_TOKEN = ENV.get("METRICS_TOKEN", "")
# qcluster touches this file every few seconds while its sentinel lives (the liveness probe
# `manage.py qcluster_alive` reads it); empty: a file under the system's temp directory.
Q_LIVENESS_FILE = ENV.get("Q_LIVENESS_FILE", "")

# Audit submissions by participants: the paid judge is opt-in, and submissions are limited.
AUDIT_PARTICIPANT_OPENAI = envparse.env_bool(ENV, "AUDIT_PARTICIPANT_OPENAI", False)
# "none" lifts the limit.
AUDIT_DAILY_SUBMISSIONS: int | None = (
    None
    if ENV.get("AUDIT_DAILY_SUBMISSIONS", "").strip().lower() == "none"
    else envparse.env_int(ENV, "AUDIT_DAILY_SUBMISSIONS", 10, minimum=0)
)
# Findings one audit submission may hold; more are refused (each costs judge calls and rows).
AUDIT_MAX_FINDINGS = envparse.env_int(ENV, "AUDIT_MAX_FINDINGS", 2000, minimum=1)

# Safety probes.
PROBE_GEOMETRY_MIN_CASES = envparse.env_int(ENV, "PROBE_GEOMETRY_MIN_CASES", 5, minimum=2)
PROBE_PASS_THRESHOLD = envparse.env_float(ENV, "PROBE_PASS_THRESHOLD", 0.5)
PROBE_SEVERITY_WEIGHTS = envparse.env_weights(ENV, "PROBE_SEVERITY_WEIGHTS")
# A new suite's refusal signal (rules, classifier, openai); empty: the best held-out one.
PROBE_REFUSAL_SIGNAL_DEFAULT = ENV.get("PROBE_REFUSAL_SIGNAL_DEFAULT", "")
# Votes per response of the openai refusal judge (labelling one text is near-deterministic).
PROBE_REFUSAL_JUDGE_ITERATIONS = envparse.env_int(
    ENV, "PROBE_REFUSAL_JUDGE_ITERATIONS", 1, minimum=1
)

# Checklist challenge.
CHECKLIST_DAILY_LIMIT = envparse.env_int(ENV, "CHECKLIST_DAILY_LIMIT", 3, minimum=0)
CHECKLIST_TOTAL_LIMIT = envparse.env_int(ENV, "CHECKLIST_TOTAL_LIMIT", 20, minimum=0)
CHECKLIST_BODY_WORD_CAP = envparse.env_int(ENV, "CHECKLIST_BODY_WORD_CAP", 15000, minimum=100)
# Papers (PDF, LaTeX) are read in a child process bounded in CPU seconds and memory; a PDF
# over the page, decompressed content, operator or nesting limits is refused before its text
# is read. The CPU time is the bound: the wall time (PDF_PARSE_WALL_S, 10x by default) is only
# a backstop, so that a loaded machine cannot refuse a genuine paper.
PDF_PARSE_TIMEOUT_S = max(1.0, envparse.env_float(ENV, "PDF_PARSE_TIMEOUT_S", 10.0))
PDF_PARSE_WALL_S = max(
    PDF_PARSE_TIMEOUT_S + 1.0,
    envparse.env_float(ENV, "PDF_PARSE_WALL_S", 10 * PDF_PARSE_TIMEOUT_S),
)
# Papers read at once on the whole site (every web and queue process, every machine sharing
# the cache); past it a read is refused with 503 and Retry-After. A reader holds its slot as a
# lease renewed while it reads, so a dead holder's slot frees after PAPER_READER_LEASE_S.
PAPER_READERS_MAX = envparse.env_int(ENV, "PAPER_READERS_MAX", os.cpu_count() or 1, minimum=1)
PAPER_READER_LEASE_S = envparse.env_int(ENV, "PAPER_READER_LEASE_S", 30, minimum=3)
# Large result files (audit results, probe responses: CSV or JSON, file or body) parsed at
# once on the whole site, a pool apart from the papers'; files under UPLOAD_READ_SLOT_MIN_KB
# parse in the time a page takes and are not counted. Past it 503 with Retry-After.
UPLOAD_READERS_MAX = envparse.env_int(ENV, "UPLOAD_READERS_MAX", os.cpu_count() or 1, minimum=1)
UPLOAD_READ_SLOT_MIN_KB = envparse.env_int(ENV, "UPLOAD_READ_SLOT_MIN_KB", 1024, minimum=0)
# Reads that store nothing, per user and hour: extraction previews, and submissions refused
# because a paper could not be read (429 with Retry-After past it).
CHECKLIST_PAPER_CHECKS_PER_HOUR = envparse.env_int(
    ENV, "CHECKLIST_PAPER_CHECKS_PER_HOUR", 30, minimum=1
)
# ... and per 10 minutes, so that the hour's allowance cannot all be spent in its first minute.
CHECKLIST_PAPER_CHECKS_PER_10_MIN = envparse.env_int(
    ENV, "CHECKLIST_PAPER_CHECKS_PER_10_MIN", 10, minimum=1
)
# Submissions of result files (audit results, probe responses) refused for their content
# (400/413: not CSV or JSON, over a limit), per user and hour; past it the user's next
# submission is answered 429 with Retry-After before it is parsed.
UPLOAD_REFUSALS_PER_HOUR = envparse.env_int(ENV, "UPLOAD_REFUSALS_PER_HOUR", 20, minimum=1)
# ... and per 10 minutes (the hour's allowance is not for one burst).
UPLOAD_REFUSALS_PER_10_MIN = envparse.env_int(ENV, "UPLOAD_REFUSALS_PER_10_MIN", 5, minimum=1)
# A token refused for its rate that keeps sending (not waiting for Retry-After) gets its next
# answers this many seconds late, one such request per web process at a time (the others at
# once): a client in a loop then sends about one request a second, not a hundred, while a
# sleeping thread costs no CPU (benchmarks_app.refused_senders). 0: answer at once.
REFUSED_SENDER_DELAY_S = max(0.0, envparse.env_float(ENV, "REFUSED_SENDER_DELAY_S", 1.0))
PDF_PARSE_MEMORY_MB = envparse.env_int(ENV, "PDF_PARSE_MEMORY_MB", 512, minimum=64)
# Added to the reader's niceness (0-19): on a busy machine the pages of everybody else get the
# CPU before a participant's paper (scoring.sandbox.Limits), and the paper before the judging
# (Q_NICE=10 where one machine does both). At 0, the hostile accounts' PDF bombs, read at the
# pages' priority, doubled the rush's page p95 in its first two minutes. At 10, a rush whose
# clusters took an equal share starved a genuine paper past PDF_PARSE_WALL_S (refused), which
# the CPU budget exists to prevent; raise it only with a wall backstop to match.
PDF_PARSE_NICE = envparse.env_int(ENV, "PDF_PARSE_NICE", 5, minimum=0)
PDF_MAX_PAGES = envparse.env_int(ENV, "PDF_MAX_PAGES", 300, minimum=1)
PDF_MAX_CONTENT_MB = envparse.env_int(ENV, "PDF_MAX_CONTENT_MB", 20, minimum=1)
PDF_MAX_OPERATORS = envparse.env_int(ENV, "PDF_MAX_OPERATORS", 1_000_000, minimum=1000)
PDF_MAX_NESTING = envparse.env_int(ENV, "PDF_MAX_NESTING", 32, minimum=2)
# Votes per checklist answer. "adaptive": one vote, a second (and a third on disagreement)
# only where the first failed or was unsure, so about the challenge code's 15 calls a paper;
# "two": always two, a third on disagreement (30+ calls); "single": the first vote that could
# be obtained decides. CHECKLIST_SINGLE_VOTE=1 (older name) means "single".
CHECKLIST_SINGLE_VOTE = envparse.env_bool(ENV, "CHECKLIST_SINGLE_VOTE", False)
CHECKLIST_VOTES = envparse.env_choice(
    ENV,
    "CHECKLIST_VOTES",
    ("adaptive", "two", "single"),
    "single" if CHECKLIST_SINGLE_VOTE else "adaptive",
)

# E-mail (password reset, run-end notifications): printed on the console unless an SMTP
# server is configured; setting EMAIL_HOST alone switches to SMTP.
EMAIL_BACKEND = ENV.get("EMAIL_BACKEND", "").strip() or (
    "django.core.mail.backends.smtp.EmailBackend"
    if ENV.get("EMAIL_HOST", "").strip()
    else "django.core.mail.backends.console.EmailBackend"
)
EMAIL_HOST = ENV.get("EMAIL_HOST", "").strip() or "localhost"
EMAIL_PORT = envparse.env_int(ENV, "EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = ENV.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = ENV.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envparse.env_bool(ENV, "EMAIL_USE_TLS", False)
# A stalled mail server must not hold a queue worker forever.
EMAIL_TIMEOUT = envparse.env_int(ENV, "EMAIL_TIMEOUT", 20, minimum=1)
DEFAULT_FROM_EMAIL = ENV.get("DEFAULT_FROM_EMAIL", "evalplatform@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# The site's public address: links in e-mails and webhook payloads sent from the queue, where
# there is no request to take it from.
SITE_URL = ENV.get("SITE_URL", "http://localhost:8000").strip().rstrip("/")
# Webhooks. Outside DEBUG, URLs that resolve to private, loopback or link-local addresses are
# refused (the site would otherwise POST into its own network: SSRF).
WEBHOOK_ALLOW_PRIVATE = envparse.env_bool(ENV, "WEBHOOK_ALLOW_PRIVATE", DEBUG)
# The whole of one attempt (connect, TLS, sending, status line, headers, answer) must fit in
# it: a deadline, not a per-read timeout, so a receiver trickling bytes cannot stretch it.
WEBHOOK_TIMEOUT_S = envparse.env_float(ENV, "WEBHOOK_TIMEOUT_S", 10.0)
# Attempts per delivery, the first included; retries wait 30 s, 2 min, 10 min, 1 h, then 6 h.
WEBHOOK_MAX_ATTEMPTS = envparse.env_int(ENV, "WEBHOOK_MAX_ATTEMPTS", 6, minimum=1)
WEBHOOKS_PER_USER = envparse.env_int(ENV, "WEBHOOKS_PER_USER", 10, minimum=1)
# Bytes of a receiver's answer (status line, headers, body) read at most.
WEBHOOK_MAX_ANSWER_BYTES = envparse.env_int(ENV, "WEBHOOK_MAX_ANSWER_BYTES", 65536, minimum=1024)
# The queue deliveries go to (Q_CLUSTER's ALT_CLUSTERS entry; `manage.py webhook_qcluster`).
WEBHOOK_Q_CLUSTER = envparse.webhook_cluster_name(ENV)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_PAGINATION_CLASS": "benchmarks_app.api.pagination.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "benchmarks_app.api.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "benchmarks_app.api.exceptions.exception_handler",
    # DRF's JSON parser, whose errors never quote Python (see benchmarks_app/api/parsers.py).
    "DEFAULT_PARSER_CLASSES": [
        "benchmarks_app.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # The throttles key clients by benchmarks_app.client_address (which reads NUM_PROXIES
    # itself); kept here too so DRF's own get_ident agrees.
    "NUM_PROXIES": NUM_PROXIES,
    "DEFAULT_THROTTLE_CLASSES": [
        "benchmarks_app.api.throttling.AnonThrottle",
        "benchmarks_app.api.throttling.UserThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": ENV.get("API_THROTTLE_ANON", "120/min"),
        "user": ENV.get("API_THROTTLE_USER", "600/min"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Evaluation platform API",
    "DESCRIPTION": (
        "Audit findings, safety probes and the paper checklist challenge.\n\n"
        "Reads are public except private entries (checklist submissions are visible to their "
        "team only). Writes need a token (`Authorization: Token <key>`, from "
        "`POST /api/auth/token/`) or a logged-in session. Errors are JSON: "
        '`{"detail": ..., "code": ..., "errors": [{"field": ..., "reason": ..., "code": ...}]}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": ENV.get("LOG_LEVEL", "INFO")},
    # django-q logs every task at INFO, and the HTTP clients one line per judge call: keep
    # their warnings and errors only (LOG_LEVEL=DEBUG on "httpx" brings the calls back).
    "loggers": {
        "django": {"level": "INFO"},
        "django-q": {"level": "WARNING"},
        "httpx": {"level": ENV.get("HTTP_LOG_LEVEL", "WARNING")},
        # The openai client's own copy of httpx logs under this name.
        "httpx2": {"level": ENV.get("HTTP_LOG_LEVEL", "WARNING")},
        "httpcore": {"level": "WARNING"},
        "openai": {"level": "WARNING"},
    },
}

"""The judge's ledger and verdict cache (shared by the three benchmarks)."""

from __future__ import annotations

from django.db import models

from benchmarks_app.models.common import AppendOnlyModel
from benchmarks_app.models.runs import EvaluationRun


class JudgeCallStatus(models.TextChoices):
    OK = "ok", "OK"
    CACHED = "cached", "Cached"
    INVALID = "invalid", "Invalid verdict"
    TRUNCATED = "truncated", "Answer cut at the bound"
    ERROR = "error", "Error"
    # Written before the request; completed after it. A call still pending when its worker
    # died is marked lost when the sweeper re-queues its piece (or a new holder takes it).
    PENDING = "pending", "In flight"
    LOST = "lost", "Lost with its worker"
    # In flight when its run was cancelled: cut short on purpose, not answered.
    ABANDONED = "abandoned", "Abandoned in flight"
    # In flight when its piece stopped for a fault (the database cut, a write failed, the
    # worker stopping): asked again by the piece's next attempt.
    INTERRUPTED = "interrupted", "Interrupted by a fault"


class JudgeCall(AppendOnlyModel):
    """Ledger of every judge call: what it cost and how it ended."""

    run = models.ForeignKey(
        EvaluationRun, null=True, blank=True, on_delete=models.CASCADE, related_name="judge_calls"
    )
    judge = models.CharField(max_length=300)
    model = models.CharField(max_length=200, blank=True)
    prompt_hash = models.CharField(max_length=64, db_index=True)
    vote_number = models.PositiveSmallIntegerField(default=0)
    attempt = models.PositiveSmallIntegerField(default=1)
    latency_ms = models.FloatField(default=0)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    # Of tokens_out, those a reasoning model spent thinking (where the server says).
    tokens_reasoning = models.PositiveIntegerField(default=0)
    # Of tokens_in, those the server read from its prompt cache (OpenAI's, vLLM's and SGLang's
    # cached_tokens, llama.cpp's cache_n); 0 where it does not say, and on older rows.
    tokens_cached = models.PositiveIntegerField(default=0)
    # How the request was asked: model, temperature, answer bound, seed, response format,
    # stream (empty for cache hits, judges that ask no server and older rows).
    request = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=JudgeCallStatus.choices, db_index=True)
    error = models.TextField(blank=True)
    # What the server returned before parsing: the answer's text (ok, invalid, truncated) or
    # the error's body; empty for cache hits, judges that ask no server and older rows.
    raw_response = models.TextField(blank=True)
    # The :class:`JudgePrompt` asked (its key hashes the text alone, so the votes and re-asks
    # of one question share it); empty for judges that send no prompt and older rows.
    prompt_key = models.CharField(max_length=64, blank=True)
    # The lease that made the call ("<piece id>:<attempt>"): pending calls of a lease that
    # was taken over are marked lost.
    holder = models.CharField(max_length=100, blank=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Judge call #{self.pk} ({self.judge}, {self.status})"


class JudgePrompt(models.Model):
    """A prompt judges were asked, stored once per distinct text (staff only: audit prompts
    hold the hidden ground truth, checklist prompts a whole paper)."""

    key = models.CharField(max_length=64, unique=True)
    system = models.TextField()
    user = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"prompt {self.key[:12]}"


class JudgeCacheEntry(models.Model):
    """Verdicts keyed on judge, model, prompt version, prompt text and vote number.

    Only successful, valid verdicts are stored: errors are never cached.
    """

    key = models.CharField(max_length=64, unique=True)
    judge = models.CharField(max_length=300)
    model = models.CharField(max_length=200, blank=True)
    prompt_version = models.CharField(max_length=50)
    vote_number = models.PositiveSmallIntegerField(default=0)
    response = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "judge cache entries"

    def __str__(self) -> str:
        return f"{self.judge}/{self.model} vote {self.vote_number} ({self.key[:12]})"


class JudgeInFlight(models.Model):
    """A question being asked right now: others needing the same answer wait for it.

    One row per cache key while its call is in flight (single-flight across processes and
    machines); a row past ``expires_at`` belongs to a dead asker and may be taken over.
    """

    key = models.CharField(max_length=64, unique=True)
    holder = models.CharField(max_length=100, blank=True)
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.key[:12]} held by {self.holder or '?'}"

"""Who may see what: one queryset per model, filtered for the requesting user.

Every page and endpoint reads through these functions, so a visibility rule lives in one
place. Hidden ground truth (truth-finding titles and descriptions of repos not marked public:
anonymous users and participants see only names, sizes and severity counts) and the
A/T papers of a checklist triplet, with their answers and assessments, reach only staff and
the team that submitted them.

Hidden phases: the entries and runs of a hidden phase not yet revealed reach only their
entrant and staff. The rule is :func:`unrevealed_phases` and :func:`in_unrevealed_phase`;
selectors and services that need "public only" (boards, runs in progress, actions taken on an
entrant's behalf) exclude :func:`in_unrevealed_phase` rather than spell the phase's fields
out (``tests/benchmarks_app/site/test_visibility_policy.py`` holds every other module to it).
"""

from __future__ import annotations

from typing import Any

from django.db import connection
from django.db.models import Case, Count, F, Q, QuerySet, TextField, Value, When
from django.db.models.functions import Coalesce

from benchmarks_app.models import (
    Challenge,
    ChecklistAnswer,
    ChecklistAssessment,
    ChecklistSubmission,
    EvaluationRun,
    Paper,
    PaperKind,
    ProbeSuite,
    Repo,
    ResponseSubmission,
    Scanner,
    TruthFinding,
    Webhook,
    WebhookDelivery,
)
from benchmarks_app.models.audit import DatasetRelease
from benchmarks_app.models.phases import Phase, PhaseQuerySet


def is_staff(user: Any) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_staff)


def _team_ids(user: Any) -> list[int]:
    if user is None or not user.is_authenticated:
        return []
    return list(user.memberships.values_list("team_id", flat=True))


def visible_webhooks(user: Any) -> QuerySet[Webhook]:
    """A user's own webhooks (their URLs and secrets are theirs alone; staff use the admin)."""
    return Webhook.objects.filter(owner_id=getattr(user, "pk", None))


def visible_webhook_deliveries(user: Any) -> QuerySet[WebhookDelivery]:
    """The deliveries of a user's own webhooks (receivers' answers may quote their URLs)."""
    return WebhookDelivery.objects.filter(webhook__owner_id=getattr(user, "pk", None))


def visible_repos(user: Any) -> QuerySet[Repo]:
    """All repos are listed; whether their truth descriptions show is decided per finding."""
    return Repo.objects.all()


def truth_details_visible(user: Any, repo: Repo) -> bool:
    return repo.is_public or is_staff(user)


def visible_truth_findings(user: Any) -> QuerySet[TruthFinding]:
    """Truth findings whose full text (description) the user may read."""
    qs = TruthFinding.objects.select_related("repo")
    if is_staff(user):
        return qs
    return qs.filter(repo__is_public=True)


def visible_checklist_submissions(user: Any) -> QuerySet[ChecklistSubmission]:
    """Submissions whose details (papers, answers, feedback) the user may read."""
    qs = ChecklistSubmission.objects.select_related("team", "challenge")
    if is_staff(user):
        return qs
    return qs.filter(team_id__in=_team_ids(user))


def visible_papers(user: Any) -> QuerySet[Paper]:
    """Papers: a team's own and staff see all kinds; nobody else sees any paper's content.

    Genuine papers of other teams are not shown either: their content is the team's work.
    """
    qs = Paper.objects.select_related("submission", "team")
    if is_staff(user):
        return qs
    return qs.filter(team_id__in=_team_ids(user))


def visible_checklist_answers(user: Any) -> QuerySet[ChecklistAnswer]:
    qs = ChecklistAnswer.objects.select_related("paper", "question")
    if is_staff(user):
        return qs
    return qs.filter(paper__team_id__in=_team_ids(user))


def visible_checklist_assessments(user: Any) -> QuerySet[ChecklistAssessment]:
    qs = ChecklistAssessment.objects.select_related("answer__paper", "answer__question")
    if is_staff(user):
        return qs
    return qs.filter(answer__paper__team_id__in=_team_ids(user))


def visible_probe_submissions(user: Any) -> QuerySet[ResponseSubmission]:
    """Probe submissions and their reports are public, but a hidden phase's (until it is
    revealed) only to staff and their owner: participants see only their own scores meanwhile.
    Owners are shown only to staff."""
    submissions = ResponseSubmission.objects.select_related("suite")
    if is_staff(user):
        return submissions
    hidden = in_unrevealed_phase()
    if user is not None and user.is_authenticated:
        return submissions.exclude(hidden & ~Q(owner_id=user.pk))
    return submissions.exclude(hidden)


def visible_runs(user: Any) -> QuerySet[EvaluationRun]:
    """Audit and probe runs are public; checklist runs only to their team and staff.

    Runs of a hidden phase that has not been revealed are shown only to their entrant (the
    run's creator, the scanner's or submission's owner, the checklist team) and staff: their
    scores would otherwise leak the board the phase keeps hidden.
    """
    # The judge record too: a run names its judge by the record's name (``judge_label``).
    qs = EvaluationRun.objects.select_related(
        "scanner", "probe_submission__suite", "checklist_submission__team", "judge_record"
    )
    if is_staff(user):
        return qs
    # Every condition reads the run's own columns, with subqueries on the small submission,
    # scanner and phase tables rather than joins: a run list's COUNT(*) then reads one table
    # (with joins it grew from 65 to 190 ms between 3,000 and 30,000 runs).
    team_entries = ChecklistSubmission.objects.filter(team_id__in=_team_ids(user)).values("pk")
    # "No checklist submission" as COALESCE(id, 0) = 0 (ids start at 1) on SQLite, which
    # would otherwise read the 200,000 non-checklist runs of 300,000 by that column's index
    # and sort them, instead of walking the (created_at, id) index until a page is full.
    # PostgreSQL estimates IS NULL from its statistics but guesses 0.5% of the runs for the
    # COALESCE, and then sorted all 200,000 on disk to count them per status (100 ms, 58).
    if connection.vendor == "postgresql":
        qs = qs.filter(
            Q(checklist_submission_id__isnull=True) | Q(checklist_submission_id__in=team_entries)
        )
    else:
        qs = qs.alias(checklist_entry=Coalesce("checklist_submission_id", 0)).filter(
            Q(checklist_entry=0) | Q(checklist_submission_id__in=team_entries)
        )
    hidden = hidden_phase_runs()
    if getattr(user, "is_authenticated", False):
        own = (
            Q(created_by_id=user.pk)
            | Q(scanner_id__in=Scanner.objects.filter(owner_id=user.pk).values("pk"))
            | Q(
                probe_submission_id__in=ResponseSubmission.objects.filter(owner_id=user.pk).values(
                    "pk"
                )
            )
            | Q(checklist_submission_id__in=team_entries)
        )
        return qs.filter(~hidden | own)
    return qs.exclude(hidden)


def is_entrant(user: Any, run: EvaluationRun) -> bool:
    """Whether ``user`` entered ``run`` (as :func:`visible_runs` counts an entrant, who sees
    the run in a hidden phase): its creator, the scanner's or submission's owner, a member of
    the checklist team."""
    if user is None or not user.is_authenticated:
        return False
    if run.created_by_id is not None and run.created_by_id == user.pk:
        return True
    if run.scanner_id is not None and run.scanner is not None:
        return bool(run.scanner.owner_id == user.pk)
    if run.probe_submission_id is not None and run.probe_submission is not None:
        return bool(run.probe_submission.owner_id == user.pk)
    if run.checklist_submission_id is not None and run.checklist_submission is not None:
        return run.checklist_submission.team_id in _team_ids(user)
    return False


def visible_scanners(user: Any) -> QuerySet[Scanner]:
    """Scanners ``user`` may see, with ``run_count`` (their runs that ``user`` may see) and
    ``scan_result_count`` (repos with current results).

    A scanner whose every run is in a hidden phase not yet revealed is an entrant that phase
    keeps hidden: only its owner and staff see it (its name would tell who is taking part,
    its run count how often). A scanner with no run at all (imported, not yet evaluated) is
    listed as before.
    """
    if is_staff(user):
        return Scanner.objects.with_counts()
    shown = (
        Q(runs__phase__isnull=True)
        | Q(runs__phase__is_hidden=False)
        | Q(runs__phase__revealed_at__isnull=False)
    )
    mine = Q(owner_id=user.pk) if getattr(user, "is_authenticated", False) else Q(pk__in=[])
    if getattr(user, "is_authenticated", False):
        shown |= Q(owner_id=user.pk)
    return (
        Scanner.objects.with_counts(runs=shown)
        .annotate(all_runs=Count("runs", distinct=True))
        .filter(mine | Q(run_count__gt=0) | Q(all_runs=0))
    )


def unrevealed_phases() -> PhaseQuerySet:
    """The hidden phases not yet revealed: their boards, entries and runs reach only their
    entrants and staff."""
    return Phase.objects.unrevealed()


def unrevealed_phase_open(target: Challenge | DatasetRelease | ProbeSuite) -> Phase | None:
    """The hidden phase of ``target`` open now and not yet revealed (the latest started): where
    a run made on a hidden entrant's behalf goes, so that it stays as hidden as the entrant."""
    return unrevealed_phases().for_target(target).open_at().order_by("-starts_at", "-pk").first()


def in_unrevealed_phase(phase: str = "phase") -> Q:
    """The rows whose phase (``phase``: the path to a ``Phase`` foreign key, "phase" or
    "submission__phase"...) is hidden and not yet revealed. A subquery on the small phase
    table rather than a join, so that a list keeps reading its own table's indexes; exclude
    it for what everybody may see."""
    return Q(**{f"{phase}__in": unrevealed_phases().values("pk")})


def hidden_phase_runs() -> Q:
    """The runs of a hidden phase not yet revealed (a filter on ``EvaluationRun``)."""
    return in_unrevealed_phase("phase")


def scanners_hidden_from_public(scanner_ids: list[int]) -> set[int]:
    """Those of ``scanner_ids`` that anonymous visitors may not see: entrants of a hidden
    phase not yet revealed, whose every run is in such a phase (:func:`visible_scanners`).

    Actions that create runs on an entrant's behalf (a release evaluated again) ask this
    before making a run that would be public: the run would put the entrant on public boards
    and pages, and its bundle would carry the findings the phase keeps hidden.
    """
    if not scanner_ids:
        return set()
    with_runs = set(
        EvaluationRun.objects.filter(scanner_id__in=scanner_ids).values_list(
            "scanner_id", flat=True
        )
    )
    shown = set(
        EvaluationRun.objects.filter(scanner_id__in=scanner_ids)
        .exclude(hidden_phase_runs())
        .values_list("scanner_id", flat=True)
    )
    return with_runs - shown


HIDDEN_PAPER_KINDS = (PaperKind.ADVERSARIAL, PaperKind.TRUTH)


def truth_findings_redacted(user: Any) -> QuerySet[TruthFinding]:
    """All truth findings, each with ``visible_title``, ``visible_description`` and
    ``visible_category``: their text, or ``None`` where the repo is hidden from ``user``.

    Lists that show every finding (repo pages, the API) read the text only through these
    annotations, so hidden truth never leaves the database: participants see a hidden repo's
    name, size and severity counts, never what its findings say (a scanner reporting the
    titles would otherwise top the board).
    """
    qs = TruthFinding.objects.select_related("repo")
    if is_staff(user):
        return qs.annotate(
            visible_title=F("title"),
            visible_description=F("description"),
            visible_category=F("category"),
        )

    def shown(name: str) -> Case:
        return Case(
            When(repo__is_public=True, then=F(name)),
            default=Value(None),
            output_field=TextField(null=True),
        )

    return qs.annotate(
        visible_title=shown("title"),
        visible_description=shown("description"),
        visible_category=shown("category"),
    )

"""Reading audit data in every accepted shape (pure: files in, plain records out).

Each file's decoded JSON (:mod:`scoring.audit.json_files`) is parsed here into records: a repo,
a project's truth, a scan's findings, with severities and categories normalized. A file that
cannot be used raises :class:`ParseError` naming what is wrong; reading a whole data folder
(:mod:`scoring.audit.folders`) collects those as :class:`Problem` s and reads the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from scoring.audit.json_files import ParseError, nul_path
from scoring.audit.json_files import loads as loads  # the uploads decode scans with it
from scoring.audit.types import BEST_PRACTICES, HIGH, INFO, LOW, MEDIUM, ScanItem, TruthItem
from scoring.limits import DEFAULT_LIMITS, TextLimits, overlong_fields
from scoring.text import normalize_line_ends

RESERVED_FOLDERS = {"repos", "source_of_truth", "recorded"}

_SEVERITY_ALIASES = {
    "critical": HIGH,
    "crit": HIGH,
    "high": HIGH,
    "h": HIGH,
    "medium": MEDIUM,
    "med": MEDIUM,
    "moderate": MEDIUM,
    "m": MEDIUM,
    "low": LOW,
    "l": LOW,
    "info": INFO,
    "informational": INFO,
    "information": INFO,
    "note": INFO,
    "i": INFO,
    "qa": INFO,
    "bestpractice": BEST_PRACTICES,
    "bestpractices": BEST_PRACTICES,
    "gas": BEST_PRACTICES,
}


# Keyword → category, first hit wins (checked against the lower-cased vulnerability_type).
_CATEGORY_KEYWORDS: list[tuple[tuple[str, ...], str]] = [
    (("reentran",), "Reentrancy"),
    (("access control", "unauthori", "privilege", "permission", "onlyowner"), "Access control"),
    (("oracle", "stale", "price feed"), "Oracle"),
    (("front-run", "frontrun", "sandwich", "slippage", "mev"), "Front-running / slippage"),
    (
        ("overflow", "underflow", "precision", "rounding", "decimal", "arithmetic", "truncat"),
        "Arithmetic",
    ),
    (("denial of service", "denial-of-service", "dos", "griefing", "gas exhaustion"), "DoS"),
    (("signature", "nonce", "replay"), "Signatures / replay"),
    (("initiali", "upgrade", "storage collision", "proxy"), "Initialization / upgradeability"),
    (("erc20", "approval", "allowance", "token"), "Token integration"),
    (("validation", "input"), "Input validation"),
    (("accounting", "logic", "misaccount"), "Logic / accounting"),
    (("centraliz", "trust"), "Centralization / trust"),
    (("external call", "unchecked", "delegatecall"), "External calls"),
]


_CONTRACT_RE = re.compile(r"\b([A-Z][A-Za-z0-9_]{2,})\.sol\b")


# At most this many bad findings are named in one message; the rest are counted.
MAX_LISTED_PROBLEMS = 20
UNTITLED = "title and description both missing"


class FindingProblems(ParseError):
    """Findings that cannot be used, every one named (``finding N``, numbered from 1).

    ``untitled_only``: every problem is a finding with neither title nor description, which
    the participant may confirm (they are then kept, untitled) instead of fixing the file.
    """

    def __init__(self, problems: list[str], *, untitled: int = 0) -> None:
        listed = problems[:MAX_LISTED_PROBLEMS]
        more = len(problems) - len(listed)
        super().__init__("; ".join(listed) + (f"; and {more} more" if more else ""))
        self.problems = problems
        self.untitled_only = untitled == len(problems) > 0


@dataclass(frozen=True)
class Problem:
    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class RepoRecord:
    project_id: str
    name: str = ""
    platform: str = ""
    repository_url: str = ""
    contract_files: list[str] = field(default_factory=list)
    codebases: list[Any] = field(default_factory=list)
    docs: dict[str, Any] = field(default_factory=dict)


@dataclass
class TruthRecord:
    finding_id: str
    order: int
    severity: str
    raw_severity: str
    title: str
    description: str = ""
    category: str = ""
    contracts: list[str] = field(default_factory=list)


@dataclass
class ScanRecord:
    index: int
    title: str
    description: str
    severity: str
    raw_severity: str
    external_id: str = ""
    category: str = ""
    vulnerability_type: str = ""
    contracts: list[str] = field(default_factory=list)
    file: str = ""
    location: str = ""
    confidence: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ScanFile:
    scanner: str
    project_id: str
    source_name: str
    findings: list[ScanRecord]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataSet:
    """Everything read from one path; ``truths`` maps project id → findings in file order."""

    repos: dict[str, RepoRecord] = field(default_factory=dict)
    truths: dict[str, list[TruthRecord]] = field(default_factory=dict)
    scans: list[ScanFile] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files_read: int = 0

    def match_items(self, scan: ScanFile) -> tuple[list[TruthItem], list[ScanItem]]:
        """The matcher's inputs for one scan file: its repo's truths and its findings."""
        truths = [
            TruthItem.of(t, key=(scan.project_id, t.finding_id))
            for t in self.truths.get(scan.project_id, [])
        ]
        scans = [ScanItem.of(f) for f in scan.findings]
        return truths, scans


def normalize_severity(raw: Any, *, where: str = "severity") -> str:
    """Map a free-form severity onto High/Medium/Low/Info/Best Practices."""
    text = str(raw or "").strip()
    squashed = re.sub(r"[^a-z]", "", text.lower())
    if squashed in _SEVERITY_ALIASES:
        return _SEVERITY_ALIASES[squashed]
    if squashed.startswith("bestpractice"):
        return BEST_PRACTICES
    if not text:
        raise ParseError(f"{where}: missing")
    raise ParseError(
        f"{where}: unknown severity {text!r} (expected critical, high, medium, low, "
        "informational or best practices)"
    )


def category_for(vulnerability_type: str) -> str:
    text = (vulnerability_type or "").lower()
    if not text:
        return ""
    for keywords, category in _CATEGORY_KEYWORDS:
        if any(k in text for k in keywords):
            return category
    return "Other"


def contracts_in(*texts: str) -> list[str]:
    seen: dict[str, None] = {}
    for text in texts:
        for name in _CONTRACT_RE.findall(text or ""):
            seen.setdefault(name, None)
    return list(seen)


def _text(item: dict[str, Any], *keys: str) -> str:
    # Line ends as the database stores them: a file saved on Windows is no change.
    for key in keys:
        value = item.get(key)
        if value not in (None, ""):
            return normalize_line_ends(str(value))
    return ""


def parse_repo(data: Any, *, fallback_id: str = "") -> RepoRecord:
    if not isinstance(data, dict):
        raise ParseError("expected a JSON object with project_id and name")
    project_id = _text(data, "project_id", "projectId", "id") or fallback_id
    if not project_id:
        raise ParseError("project_id: missing")
    return RepoRecord(
        project_id=project_id,
        name=_text(data, "name") or project_id,
        platform=_text(data, "platform"),
        repository_url=_text(data, "repositoryURL", "repository_url", "repo_url"),
        contract_files=list(data.get("contractFiles") or data.get("contract_files") or []),
        codebases=list(data.get("codebases") or []),
        docs=dict(data.get("docs") or {}),
    )


def parse_truth(data: Any, *, project_id: str = "") -> tuple[str, list[TruthRecord]]:
    """``{project_id, vulnerabilities: [...]}`` or a list of ``{Issue, Category, ...}``."""
    if isinstance(data, dict):
        project_id = _text(data, "project_id") or project_id
        items = data.get("vulnerabilities")
        if not isinstance(items, list):
            raise ParseError("vulnerabilities: expected a list of findings")
    elif isinstance(data, list):
        items = data
    else:
        raise ParseError("expected {project_id, vulnerabilities} or a list of findings")
    if not project_id:
        raise ParseError("project_id: missing")
    records: list[TruthRecord] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"finding {i}"
        if not isinstance(item, dict):
            raise ParseError(f"{where}: expected an object")
        title = _text(item, "title", "Issue", "issue", "name")
        if not title:
            raise ParseError(f"{where}: title (or Issue) missing")
        raw_sev = _text(item, "severity", "Severity")
        severity = normalize_severity(raw_sev, where=f"{where}.severity")
        finding_id = _text(item, "finding_id", "id", "ID") or f"{project_id}-{i + 1:03d}"
        if finding_id in seen:
            raise ParseError(f"{where}: duplicate finding_id {finding_id!r}")
        seen.add(finding_id)
        description = _text(item, "description", "Description")
        contracts = item.get("Contracts") or item.get("contracts") or []
        if isinstance(contracts, str):
            contracts = [c.strip() for c in re.split(r"[,;\n]", contracts) if c.strip()]
        records.append(
            TruthRecord(
                finding_id=finding_id,
                order=i,
                severity=severity,
                raw_severity=raw_sev,
                title=title,
                description=description,
                category=_text(item, "category", "Category"),
                contracts=[str(c) for c in contracts] or contracts_in(title, description),
            )
        )
    return project_id, records


_SCAN_KNOWN = {
    "title",
    "description",
    "vulnerability_type",
    "severity",
    "confidence",
    "location",
    "file",
    "id",
}


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def parse_scan(
    data: Any,
    *,
    max_findings: int | None = None,
    allow_untitled: bool = False,
    limits: TextLimits = DEFAULT_LIMITS,
) -> tuple[list[ScanRecord], dict[str, Any]]:
    """A list of findings, or ``{project, findings: [...], token_usage, ...}``; more than
    ``max_findings`` findings, a field longer than ``limits`` or a NUL character anywhere is
    a ParseError.

    Every bad finding is named, numbered from 1 (:class:`FindingProblems`), not only the
    first. A finding with neither title nor description is one of them unless
    ``allow_untitled`` (the participant confirmed it): it is then kept as ``(untitled)``.
    Over-long fields are looked for first, over the decoded JSON, so that a file holding
    one has no record built (nor its text searched for contract names) before it is refused.
    """
    metadata: dict[str, Any] = {}
    if isinstance(data, dict):
        if "findings" not in data:
            raise ParseError("findings: missing; expected a list of findings")
        items = data["findings"]
        if not isinstance(items, list):
            raise ParseError(f"findings: expected a list of findings, got {_json_kind(items)}")
        metadata = {k: v for k, v in data.items() if k != "findings"}
    elif isinstance(data, list):
        items = data
    else:
        raise ParseError("expected a list of findings or {project, findings: [...]}")
    if max_findings is not None and len(items) > max_findings:
        raise ParseError(
            f"findings: {len(items)} findings; at most {max_findings} are accepted at once"
        )
    overlong = list(overlong_fields(metadata, "results", limits))
    overlong += [
        p for i, item in enumerate(items) for p in overlong_fields(item, f"finding {i + 1}", limits)
    ]
    if overlong:
        raise FindingProblems(overlong)
    for key, value in metadata.items():
        bad = str(key) if "\x00" in str(key) else nul_path(value, str(key))
        if bad is not None:
            raise ParseError(f"{bad}: holds a NUL character (\\u0000), which cannot be stored")
    records = []
    problems: list[str] = []
    untitled = 0
    for i, item in enumerate(items):
        where = f"finding {i + 1}"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected an object")
            continue
        if (bad := nul_path(item, where)) is not None:
            problems.append(f"{bad}: holds a NUL character (\\u0000), which cannot be stored")
            continue
        title = _text(item, "title", "Issue", "name")
        description = _text(item, "description", "Description", "details")
        if not title and not description and not allow_untitled:
            problems.append(f"{where}: {UNTITLED}")
            untitled += 1
            continue
        raw_sev = _text(item, "severity", "Severity")
        try:
            severity = normalize_severity(raw_sev, where=f"{where}.severity")
        except ParseError as exc:
            problems.append(str(exc))
            continue
        vtype = _text(item, "vulnerability_type", "Category", "category", "type")
        confidence: float | None
        try:
            confidence = float(item["confidence"]) if item.get("confidence") is not None else None
        except (TypeError, ValueError):
            problems.append(f"{where}.confidence: not a number")
            continue
        if problems:
            continue  # the file is refused: only the problems matter now
        file = _text(item, "file")
        records.append(
            ScanRecord(
                index=i,
                title=title or description[:120] or "(untitled)",
                description=description,
                severity=severity,
                raw_severity=raw_sev,
                external_id=_text(item, "id", "finding_id")[:200],
                category=category_for(vtype),
                vulnerability_type=vtype[:300],
                contracts=contracts_in(file, title, description),
                file=file[:500],
                location=_text(item, "location")[:500],
                confidence=confidence,
                extra={k: v for k, v in item.items() if k not in _SCAN_KNOWN},
            )
        )
    if problems:
        raise FindingProblems(problems, untitled=untitled)
    return records, metadata


def scan_project_id(filename: str) -> str:
    """``<repo>_results.json`` or ``baseline_<repo>.json`` → ``<repo>``."""
    stem = filename.removesuffix(".json")
    if stem.endswith("_results"):
        return stem.removesuffix("_results")
    if stem.startswith("baseline_"):
        return stem.removeprefix("baseline_")
    return stem


def parse_projects(data: Any) -> tuple[list[RepoRecord], dict[str, list[TruthRecord]]]:
    """A single file holding a list of projects, each with its vulnerabilities."""
    if not isinstance(data, list):
        raise ParseError("expected a list of projects")
    repos: list[RepoRecord] = []
    truths: dict[str, list[TruthRecord]] = {}
    for i, project in enumerate(data):
        try:
            repo = parse_repo(project)
            _, records = parse_truth(
                {"vulnerabilities": project.get("vulnerabilities") or []},
                project_id=repo.project_id,
            )
        except ParseError as exc:
            raise ParseError(f"project {i}: {exc}") from None
        repos.append(repo)
        truths[repo.project_id] = records
    return repos, truths

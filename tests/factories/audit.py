from __future__ import annotations

from typing import cast

import factory

from benchmarks_app.models import Repo, ScanFinding, Scanner, ScanResult, TruthFinding
from benchmarks_app.services.audit.importing import stored_findings_hash


class RepoFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Repo

    project_id = factory.Sequence(lambda n: f"code4rena_repo{n}_2025_01")
    name = factory.Sequence(lambda n: f"Repo {n}")
    platform = "code4rena"
    is_public = True


class TruthFindingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TruthFinding

    repo = factory.SubFactory(RepoFactory)
    finding_id = factory.Sequence(lambda n: f"H-{n:02d}")
    order = factory.Sequence(lambda n: n)
    severity = "High"
    title = factory.Sequence(lambda n: f"Truth finding {n}")
    description = "The withdraw function of Vault.sol can be re-entered to drain funds."


class ScannerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Scanner
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"scanner{n}")


class ScanResultFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ScanResult

    scanner = factory.SubFactory(ScannerFactory)
    repo = factory.SubFactory(RepoFactory)
    source_name = "factory.json"


class ScanFindingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ScanFinding

    scan_result = factory.SubFactory(ScanResultFactory)
    index = factory.Sequence(lambda n: n)
    title = factory.Sequence(lambda n: f"Scan finding {n}")
    description = "Something about a contract."
    severity = "High"


def repo_with_scan(
    *, truths: list[str], findings: list[str], scanner: str = "tool", qa: tuple[int, ...] = ()
) -> tuple[Repo, ScanResult]:
    """A repo whose truth titles and scan titles are given (scan indices from 0)."""
    repo = cast(Repo, RepoFactory())
    for i, title in enumerate(truths):
        TruthFindingFactory(repo=repo, finding_id=f"F-{i}", order=i, title=title)
    result = cast(ScanResult, ScanResultFactory(repo=repo, scanner=ScannerFactory(name=scanner)))
    for i, title in enumerate(findings):
        ScanFindingFactory(
            scan_result=result, index=i, title=title, severity="Info" if i in qa else "High"
        )
    # As an import would have stored it, so that importing the same findings is a no-op.
    result.content_hash = stored_findings_hash(result)
    result.save(update_fields=["content_hash"])
    return repo, result

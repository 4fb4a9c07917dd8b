"""Each stored vote names the scan findings of the batch it was asked about (``seen``), so the
review queue can show a maintainer what the judge saw; both schedules record the same."""

from __future__ import annotations

import asyncio
from typing import Any

from scoring.audit.matching import match_repo
from scoring.audit.schedule import match_repo_concurrent
from scoring.audit.types import VoteLog
from tests.scoring.audit.helpers import ScriptedJudge, scans, truths


def _script(key: Any, batch: tuple[int, ...], vote: int) -> Any:
    # The first truth matches scan finding 3 exactly; everything else is none.
    return ("match", 3) if key == truths(2)[0].key and 3 in batch else "none"


def test_votes_keep_their_batch_and_both_schedules_agree() -> None:
    found = []
    for run in (match_repo, match_repo_concurrent):
        result = asyncio.run(
            run(ScriptedJudge(_script), truths(2), scans(12), batch_size=5, iterations=2)
        )
        found.append([[v.as_dict() for v in o.votes] for o in result.outcomes])
    assert found[0] == found[1]
    first, second = found[0]
    assert [(v["batch"], v["seen"]) for v in first] == [(1, [0, 1, 2, 3, 4])] * 2
    # The second truth's pool lost the exactly matched finding 3: its batches show it gone.
    assert [(v["batch"], v["seen"]) for v in second] == [
        (1, [0, 1, 2, 4, 5]),
        (1, [0, 1, 2, 4, 5]),
        (2, [6, 7, 8, 9, 10]),
        (2, [6, 7, 8, 9, 10]),
        (3, [11]),
        (3, [11]),
    ]


def test_a_vote_without_its_batch_stores_no_seen_key() -> None:
    # Votes decided again from a bundle do not know their batch: nothing is invented.
    assert "seen" not in VoteLog(batch=1, number=1, label="none", index=None).as_dict()

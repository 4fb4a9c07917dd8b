"""Calls that open alike are pinned to one llama.cpp slot (scoring/judges/slots.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from scoring.judges.llm import CallRecord, LLMConfig, make_client, structured_call
from scoring.judges.server import LLAMA_CPP, VLLM, ServerProfile
from scoring.judges.slots import PREFIX_KEY_CHARS, SlotAffinity, opening_key
from tests.scoring.judges.fake_openai import FakeOpenAI, completion


class Answer(BaseModel):
    label: str


def test_an_opening_keeps_its_slot_and_new_openings_go_to_the_idle_one() -> None:
    affinity = SlotAffinity(2)
    a, b = opening_key("sys", "repo A"), opening_key("sys", "repo B")
    with affinity.pinned(a) as first:
        # While repo A's call is in flight, repo B's new opening goes to the other slot...
        assert affinity.slot_for(b) != first
        # ...and a second call of repo A waits for its own slot rather than take the idle one.
        with affinity.pinned(a) as again:
            assert again == first
            assert affinity.in_flight[first] == 2
    assert affinity.in_flight == [0, 0]


def test_with_nothing_in_flight_processes_agree_on_an_openings_slot() -> None:
    """Two processes (two affinities) place the same openings alike, spread over the slots."""
    keys = [opening_key("sys", f"repo {n}") for n in range(64)]
    here, there = SlotAffinity(4), SlotAffinity(4)
    placed = [here.slot_for(k) for k in keys]
    assert placed == [there.slot_for(k) for k in reversed(keys)][::-1]
    assert set(placed) == {0, 1, 2, 3}
    assert placed == [int(k[:8], 16) % 4 for k in keys]


def test_the_oldest_opening_is_forgotten_past_the_bound() -> None:
    affinity = SlotAffinity(3, remembered=2)
    a, b, c = (opening_key("sys", name) for name in "abc")
    for key in (a, b):
        affinity.slot_for(key)
    affinity.slot_for(a)  # a is used again: b is now the oldest
    affinity.slot_for(c)
    assert list(affinity._slot_of) == [a, c]


def test_the_key_is_the_system_prompt_and_the_user_messages_opening() -> None:
    shared = "L" * PREFIX_KEY_CHARS
    assert opening_key("sys", shared + "truth A") == opening_key("sys", shared + "truth B")
    assert opening_key("sys", shared) != opening_key("other system", shared)
    assert opening_key("sys", "short A") != opening_key("sys", "short B")
    with pytest.raises(ValueError, match="slots"):
        SlotAffinity(0)


def _ask_together(config: LLMConfig, calls: list[tuple[str, int]]) -> list[CallRecord]:
    """Ask every (user message, vote number) at once through the real client."""
    records: list[CallRecord] = []

    async def go() -> None:
        client = make_client(config)
        try:
            await asyncio.gather(
                *(
                    structured_call(
                        client,
                        config=config,
                        judge_name="t",
                        prompt_version="v1",
                        system="sys",
                        user=user,
                        schema=Answer,
                        vote_number=vote,
                        record=records.append,
                    )
                    for user, vote in calls
                )
            )
        finally:
            await client.close()

    asyncio.run(go())
    return records


def _slow_answer(in_flight: list[int], lock: threading.Lock) -> Any:
    def handle(body: dict[str, Any]) -> Any:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        time.sleep(0.3)  # long enough for every call of the test to be in flight together
        with lock:
            in_flight[0] -= 1
        return completion('{"label": "a"}')

    return handle


REPO_A = "A" * PREFIX_KEY_CHARS
REPO_B = "B" * PREFIX_KEY_CHARS


def _config(srv: FakeOpenAI, profile: ServerProfile, **options: Any) -> LLMConfig:
    config = LLMConfig(model="m", base_url=srv.base_url, max_retries=1, timeout_s=10, **options)
    config.profile = profile
    return config


def test_a_llama_cpp_server_gets_one_slot_per_opening_through_the_real_client() -> None:
    in_flight, lock = [0, 0], threading.Lock()
    with FakeOpenAI(_slow_answer(in_flight, lock)) as srv:
        config = _config(srv, ServerProfile(server=LLAMA_CPP, slots=2))
        calls = [
            (REPO_A + "\ntruth 1", 1),
            (REPO_A + "\ntruth 1", 2),  # the second vote of the same question
            (REPO_A + "\ntruth 2", 1),  # another truth finding against the same list
            (REPO_B + "\ntruth 3", 1),  # another repo's list
        ]
        records = _ask_together(config, calls)
    assert in_flight[1] == 4  # all four were asked at once: the client does not serialize them
    # Vote n is sent seed + n (seed 0 here): the request's seed tells its vote.
    slot_of = {(r["messages"][1]["content"], r["seed"]): r["id_slot"] for r in srv.requests}
    a_slots = {slot_of[call] for call in calls[:3]}
    b_slot = slot_of[calls[3]]
    assert len(a_slots) == 1 and b_slot not in a_slots and {*a_slots, b_slot} == {0, 1}
    # The ledger keeps the slot each call was sent to.
    assert sorted(r.request["id_slot"] for r in records) == sorted(slot_of.values())


@pytest.mark.parametrize(
    ("profile", "options"),
    [
        (ServerProfile(server=LLAMA_CPP, slots=2), {"pin_slots": False}),  # JUDGE_PIN_SLOTS=0
        (ServerProfile(server=LLAMA_CPP, slots=1), {}),  # one slot: nothing to choose
        (ServerProfile(server=VLLM), {}),  # its prefix cache is shared by every request
        (ServerProfile(), {}),  # a server that does not say what it is (OpenAI's API)
    ],
)
def test_no_slot_is_named_where_it_means_nothing(
    profile: ServerProfile, options: dict[str, Any]
) -> None:
    with FakeOpenAI(lambda _: completion('{"label": "a"}')) as srv:
        records = _ask_together(
            _config(srv, profile, **options), [(REPO_A + "x", 1), (REPO_B + "y", 1)]
        )
    assert len(srv.requests) == 2
    assert all("id_slot" not in r for r in srv.requests)
    assert all("id_slot" not in r.request for r in records)

"""Calls that open alike go to one llama.cpp slot, so that its prompt cache serves what they share.

llama.cpp keeps each slot's last prompt in that slot's memory and reads a new prompt only from
where it stops matching it. Left to itself, a request goes to an idle slot, so two requests
that share their opening (a repo's list of scanner findings, a paper before its questions) and
arrive together are each read from the first token on separate slots. That happens on every
question with the default three votes: votes 1 and 2 of one question are the same prompt, asked
together. Naming the slot (``id_slot``, which llama.cpp honours by waiting for that slot when
it is busy) makes the second wait for the first and read only the tokens after the shared
part; calls whose openings differ are spread over the other slots, so the server stays busy.

Only for a server that says it is llama.cpp and has more than one slot (its ``/props``, read by
the probe): on other servers ``id_slot`` means nothing, and their prefix caches need no help.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scoring.judges.llm_config import LLMConfig

# The opening that decides a call's slot: the system prompt and this many characters of the
# user message. Long enough to tell two repos' lists of findings (or two papers) apart, short
# enough to end inside the part their calls share (the audit prompt's list runs to thousands of
# characters before the verified finding; the checklist prompt's paper before the question).
PREFIX_KEY_CHARS = 1000
# Openings remembered per server; the oldest is forgotten first (a later call with it is then
# placed afresh, on the least busy slot).
REMEMBERED_OPENINGS = 4096


def opening_key(system: str, user: str) -> str:
    """What two prompts must share to be sent to the same slot."""
    text = f"{system}\x00{user[:PREFIX_KEY_CHARS]}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class SlotAffinity:
    """Which slot each opening goes to, and how many calls each slot has in flight.

    A new opening goes to the slot with the fewest calls in flight in this process, and keeps
    it. Of slots equally busy, the one its key names (the key modulo the slots, then the next
    ones): processes that share a server do not count each other's calls, and so spread their
    openings over its slots, and send the same opening to the same slot, instead of all
    starting on slot 0. Thread-safe: a process's runs share one per server.
    """

    def __init__(self, slots: int, *, remembered: int = REMEMBERED_OPENINGS) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self.slots = slots
        self.remembered = max(1, remembered)
        self.in_flight = [0] * slots
        self._slot_of: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def slot_for(self, key: str) -> int:
        """The slot of ``key``'s opening (a hex digest, :func:`opening_key`), placed if new."""
        with self._lock:
            return self._slot_for(key)

    def _slot_for(self, key: str) -> int:
        slot = self._slot_of.get(key)
        if slot is not None:
            self._slot_of.move_to_end(key)
            return slot
        named = int(key[:8], 16) % self.slots
        slot = min(range(self.slots), key=lambda s: (self.in_flight[s], (s - named) % self.slots))
        self._slot_of[key] = slot
        if len(self._slot_of) > self.remembered:
            self._slot_of.popitem(last=False)
        return slot

    @contextmanager
    def pinned(self, key: str) -> Iterator[int]:
        """The slot for ``key``, counted as busy with one more call until the block ends."""
        with self._lock:
            slot = self._slot_for(key)
            self.in_flight[slot] += 1
        try:
            yield slot
        finally:
            with self._lock:
                self.in_flight[slot] -= 1


_AFFINITIES: dict[tuple[str, str, int], SlotAffinity] = {}
_AFFINITIES_LOCK = threading.Lock()


def affinity_for(base_url: str, model: str, slots: int) -> SlotAffinity:
    """The process's :class:`SlotAffinity` for one server and model (created on first use)."""
    key = (base_url, model, slots)
    with _AFFINITIES_LOCK:
        affinity = _AFFINITIES.get(key)
        if affinity is None:
            affinity = _AFFINITIES[key] = SlotAffinity(slots)
        return affinity


def forget_affinities() -> None:
    """Drop every server's placements (tests start from a fresh process's state)."""
    with _AFFINITIES_LOCK:
        _AFFINITIES.clear()


@asynccontextmanager
async def slot_pin(config: LLMConfig, system: str, user: str) -> AsyncIterator[int | None]:
    """The slot a call is pinned to while it is in flight (None: not pinned)."""
    slots = config.pinned_slots
    if not slots or not config.base_url:
        yield None
        return
    affinity = affinity_for(config.base_url, config.model, slots)
    with affinity.pinned(opening_key(system, user)) as slot:
        yield slot

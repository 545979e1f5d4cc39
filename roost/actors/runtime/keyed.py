"""One ``asyncio.Lock`` per key, kept only while a request holds it or waits for it.

The node takes an operation id's requests one at a time (``Control``) and a record's typed input
one at a time (``Inputs``); the keys come and go with the requests, so a lock is dropped as the
last user leaves rather than kept for every key ever seen.
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0  # holding it or waiting for it


class KeyedLocks:
    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        """Keys held or waited for now."""
        return len(self._entries)

    def hold(self, key: str) -> _Held:
        """``async with locks.hold(key):`` runs the block alone among the holders of ``key``."""
        return _Held(self._entries, key)


class _Held:
    __slots__ = ("_entries", "_entry", "_key")

    def __init__(self, entries: dict[str, _Entry], key: str) -> None:
        self._entries, self._key = entries, key
        self._entry = entries.get(key) or entries.setdefault(key, _Entry())

    async def __aenter__(self) -> None:
        entry = self._entry
        entry.users += 1
        try:
            await entry.lock.acquire()
        except BaseException:  # cancelled while waiting: no longer a user
            self._leave()
            raise

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._entry.lock.release()
        self._leave()

    def _leave(self) -> None:
        entry = self._entry
        entry.users -= 1
        if entry.users == 0 and self._entries.get(self._key) is entry:
            del self._entries[self._key]

"""Web Push from ``roost web``: each notice of the page (a session needs attention, ends a turn)
also goes to every subscribed browser, through its push service, while no page is open.

A message is encrypted for the subscription (RFC 8291) and signed for with a VAPID token
(RFC 8292); a push service that answers 404 or 410 says the subscription is gone, and it is
dropped. Sending never holds up the event feed: each message is its own task, with a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from pathlib import Path
from typing import Any

import aiohttp

from roost.web import vapid
from roost.wire.errors import RoostError

log = logging.getLogger("roost.web.push")
SEND_S = 15.0
TTL_S = 3600  # a phone that is off gets what happened in the last hour


class Pusher:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.subscriptions = vapid.Subscriptions(state_dir)
        self._keys: tuple[int, vapid.Vapid | None] = (-1, None)
        self._http: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def keys(self) -> vapid.Vapid | None:
        """The key pair, read again when ``roost web keys`` changed it (or made it)."""
        path = self.state_dir / "web" / vapid.KEYS_FILE
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            stamp = 0
        if stamp != self._keys[0]:
            self._keys = (stamp, vapid.load_keys(self.state_dir) if stamp else None)
        return self._keys[1]

    def public_key(self) -> str:
        try:
            keys = self.keys()
        except RoostError:
            return ""
        return keys.public_key if keys else ""

    def notice(self, message: dict[str, Any]) -> None:
        """From the backend's notice: one task per subscription; nothing waits for them."""
        subs = self.subscriptions.all()
        if not subs:
            return
        try:
            keys = self.keys()
        except RoostError as err:
            log.warning("web push: %s", err.message)
            return
        if keys is None:
            return
        payload = json.dumps(
            {
                "title": f"roost: {message['name']}",
                "body": message["text"],
                "tag": f"{message['key']}:{message['kind']}",
                "key": message["key"],
                "kind": message["kind"],
                "url": "/",
            }
        ).encode()
        urgency = "high" if message["kind"] == "attention" else "normal"
        for sub in subs:
            task = asyncio.create_task(self.send(keys, sub, payload, urgency))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def send(
        self, keys: vapid.Vapid, sub: dict[str, Any], payload: bytes, urgency: str
    ) -> None:
        endpoint = str(sub["endpoint"])
        body = vapid.encrypt(
            payload, vapid.unb64u(sub["keys"]["p256dh"]), vapid.unb64u(sub["keys"]["auth"])
        )
        headers = {
            "Authorization": keys.authorization(endpoint),
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
            "TTL": str(TTL_S),
            "Urgency": urgency,
        }
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SEND_S))
        try:
            async with self._http.post(endpoint, data=body, headers=headers) as answer:
                if answer.status in (404, 410):
                    self.subscriptions.remove(endpoint)
                elif answer.status >= 300:
                    text = (await answer.text())[:200]
                    log.warning("web push to %s: %s %s", endpoint, answer.status, text)
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("web push to %s failed: %s", endpoint, err)

    async def close(self) -> None:
        for task in [*self._tasks]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._http is not None:
            await self._http.close()

"""Tokens and cost in the state store: what each provider reported, per turn and per session.

A stream turn's figures come with its end (``state.turn.end``'s ``result.usage``) and are kept
in the same transaction, one row per turn. A session's running totals (codex's rollout, kimi's
wire file, claude's statusline) come as ``state.usage.add`` with ``totals``: the store keeps the
last totals of each (provider session, source) in ``usage_marks`` and adds a row for what is new
since them, so a report delivered twice (an outbox re-sending after a lost reply) adds nothing.
Each row added publishes ``session.usage``. Rows outlive their record (``roost usage`` still
counts a forgotten session, under the name it had).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import msgpack

from roost.actors.runtime.peer import Serving
from roost.actors.state import db
from roost.actors.state.writer import Writer
from roost.wire import fields as f
from roost.wire import protocol as p
from roost.wire import usage as u
from roost.wire.errors import RoostError
from roost.wire.messages import Event

GROUPS = ("session", "provider", "day")
# Where a report's figures come from: a stream turn's output, the CLI's own files (codex's
# rollout, Kimi Code's wire, claude's transcript: one kind per provider), claude's statusline.
SOURCES = frozenset({"stream", "files", "statusline"})
_SUMS = (
    "SUM(input) AS input, SUM(output) AS output, SUM(cache_read) AS cache_read, "
    "SUM(cache_write) AS cache_write, SUM(cost_usd) AS cost_usd, COUNT(cost_usd) AS costed"
)


def _usage(row: sqlite3.Row) -> u.Usage:
    costed = row["costed"]  # how many of the rows summed have a cost: none, no cost known
    return u.make(
        row["input"], row["output"], row["cache_read"], row["cache_write"],
        row["cost_usd"] if costed else None,
    )  # fmt: skip


def insert(
    conn: sqlite3.Connection,
    record: dict[str, Any],
    usage: u.Usage,
    *,
    source: str,
    turn: str | None = None,
    provider_session: str | None = None,
    ts: float | None = None,
) -> None:
    """One row of figures (a turn's, or a session's new part) for ``record``."""
    conn.execute(
        "INSERT OR IGNORE INTO usage (record_id, name, provider, provider_session, turn_id, "
        "source, ts, input, output, cache_read, cache_write, cost_usd) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record["id"], record.get("name"), record["provider"], provider_session, turn,
            source, time.time() if ts is None else ts, usage["input"], usage["output"],
            usage["cache_read"], usage["cache_write"], usage.get("cost_usd"),
        ),
    )  # fmt: skip


FORK_MARK = "fork:files"  # a fork's first read of its files starts from here


def seed_fork(conn: sqlite3.Connection, record_id: str, origin: dict[str, Any]) -> None:
    """A fork's conversation files begin as a copy of its source's, the figures of the source's
    answers included: the source's last totals read from its files (``origin``: its record and
    provider session) are kept as where the fork's own first read starts, so the copy is not
    counted twice. A first read below them (a CLI whose copy leaves the figures out) counts in
    full, as ``u.since`` does with any figure that went down."""
    key = f"files:{origin.get('provider_session') or ''}"
    row = conn.execute(
        "SELECT totals FROM usage_marks WHERE record_id=? AND key=?",
        (str(origin.get("record") or ""), key),
    ).fetchone()
    if row is not None:
        conn.execute(
            "INSERT OR REPLACE INTO usage_marks (record_id, key, totals, updated) "
            "VALUES (?, ?, ?, ?)",
            (record_id, FORK_MARK, row[0], time.time()),
        )


def advance(conn: sqlite3.Connection, record_id: str, key: str, totals: u.Usage) -> u.Usage:
    """What ``totals`` (a session's running totals under ``key``) add to the last ones kept;
    they become the ones kept. A fork's first totals from its files start from its source's
    (``seed_fork``)."""
    row = conn.execute(
        "SELECT totals FROM usage_marks WHERE record_id=? AND key=?", (record_id, key)
    ).fetchone()
    if row is None and key.startswith("files:"):
        row = conn.execute(
            "SELECT totals FROM usage_marks WHERE record_id=? AND key=?", (record_id, FORK_MARK)
        ).fetchone()
    before = u.check(msgpack.unpackb(row[0], raw=False)) if row else None
    conn.execute(
        "INSERT OR REPLACE INTO usage_marks (record_id, key, totals, updated) VALUES (?, ?, ?, ?)",
        (record_id, key, msgpack.packb(dict(totals), use_bin_type=True), time.time()),
    )
    return u.since(totals, before)


def totals(conn: sqlite3.Connection, record_ids: list[str] | None = None) -> dict[str, u.Usage]:
    """Each record's figures so far (only records with any)."""
    sql = f"SELECT record_id, {_SUMS} FROM usage"
    args: tuple[Any, ...] = ()
    if record_ids is not None:
        sql += f" WHERE record_id IN ({', '.join('?' for _ in record_ids)})"
        args = tuple(record_ids)
    rows = conn.execute(sql + " GROUP BY record_id", args).fetchall()
    return {row["record_id"]: _usage(row) for row in rows}


def summed(conn: sqlite3.Connection, since: float, by: str) -> list[dict[str, Any]]:
    """The figures since ``since`` (epoch seconds) summed by ``session`` (a record: its current
    name, else the one it had), ``provider`` or ``day`` (UTC), largest first for the first two,
    in date order for days."""
    if by == "session":
        key = "record_id"
        head = "record_id, MAX(provider) AS provider, MAX(name) AS name"
        order = "SUM(input + output + cache_read + cache_write) DESC"
    elif by == "provider":
        key = head = "provider"
        order = "SUM(input + output + cache_read + cache_write) DESC"
    else:
        key = "day"
        head = "date(ts, 'unixepoch') AS day"
        order = "day"
    rows = conn.execute(
        f"SELECT {head}, {_SUMS}, COUNT(*) AS reports FROM usage WHERE ts >= ? "
        f"GROUP BY {key} ORDER BY {order}",
        (since,),
    ).fetchall()
    out = []
    for row in rows:
        item: dict[str, Any] = {"day": row["day"]} if by == "day" else {"provider": row["provider"]}
        if by == "session":
            item.update(record=row["record_id"], name=_name(conn, row["record_id"], row["name"]))
        out.append({**item, "usage": _usage(row), "reports": row["reports"]})
    return out


def _name(conn: sqlite3.Connection, record_id: str, kept: str | None) -> str | None:
    row = conn.execute("SELECT name FROM records WHERE id=?", (record_id,)).fetchone()
    return row[0] if row else kept


def turn_usage(result: dict[str, Any]) -> u.Usage | None:
    """A turn result's ``usage``, when it holds figures."""
    usage = u.check(result.get("usage"))
    return None if usage is None or u.empty(usage) else usage


def usage_event(record: dict[str, Any], generation: int, data: dict[str, Any]) -> Event:
    return {"kind": "session.usage", "record": record["id"], "generation": generation, "data": data}


class Ledger:
    """The ``state.usage.*`` methods."""

    def __init__(self, store: Writer) -> None:
        self.store = store

    def handlers(self) -> dict[str, Serving]:
        return {
            "state.usage.add": self._add,
            "state.usage.sum": self._sum,
            "state.usage.totals": self._totals,
        }

    async def _add(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        """``{record, generation, source, totals, provider_session?, turn?}``: a session's
        running totals as the provider reported them."""
        record_id = f.req_str(body, "record", max_len=128)
        generation = f.req_int(body, "generation")
        source = f.req_str(body, "source", max_len=64)
        if source not in SOURCES:
            raise RoostError(
                "bad-request", "field 'source' is not a usage source", {"field": "source"}
            )
        reported = u.check(body.get("totals"))
        if reported is None:
            raise RoostError("bad-request", "field 'totals' must be a map", {"field": "totals"})
        session = f.opt_str(body, "provider_session", max_len=256)
        turn = f.opt_str(body, "turn", max_len=128)

        def mutation() -> tuple[dict[str, Any], list[Event]]:
            record = db.get_record(self.store.conn, record_id).to_wire()
            new = advance(self.store.conn, record_id, f"{source}:{session or ''}", reported)
            if u.empty(new):
                return {"added": None}, []
            insert(self.store.conn, record, new, source=source, turn=turn, provider_session=session)
            total = totals(self.store.conn, [record_id]).get(record_id, u.zero())
            data = {"usage": new, "total": total, "source": source, "turn": turn}
            return {"added": new}, self.store.append([usage_event(record, generation, data)])

        return await self.store.write(mutation)

    async def _sum(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        since = body.get("since")
        if since is not None and (isinstance(since, bool) or not isinstance(since, int | float)):
            raise RoostError(
                "bad-request", "field 'since' must be epoch seconds", {"field": "since"}
            )
        start = 0.0 if since is None else float(since)
        return {
            "since": since,
            "total": _all(self.store.conn, start),
            **{by: summed(self.store.conn, start, by) for by in GROUPS},
        }

    async def _totals(self, h: p.Header, body: dict[str, Any]) -> dict[str, Any]:
        ids = f.str_list(body, "records") if body.get("records") is not None else None
        return {"totals": totals(self.store.conn, ids)}


def _all(conn: sqlite3.Connection, since: float) -> u.Usage:
    row = conn.execute(f"SELECT {_SUMS} FROM usage WHERE ts >= ?", (since,)).fetchone()
    return _usage(row) if row["input"] is not None else u.zero()

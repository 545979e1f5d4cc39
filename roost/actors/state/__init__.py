"""The state store and the durable model: records, SQLite schema, journal, retention, checks,
repair. The node daemon starts it (``-m roost.actors.state``); ``node repair``, ``state.repair``.
"""

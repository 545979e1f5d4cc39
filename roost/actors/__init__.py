"""roost's processes, one folder per kind: ``node`` (the daemon and its actor), ``state`` (the state
store), ``supervisor`` (one per session), ``hub``, the adapter host (``adapter_host``),
on ``runtime``.

Each is started as ``python -m roost.actors.<kind>``; the imports go one way only (see
``.importlinter``): hub -> node -> {supervisor, state, adapter_host} -> runtime -> roost.broker,
roost.client -> roost.wire.
"""

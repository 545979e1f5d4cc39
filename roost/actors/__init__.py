"""roost's processes, one folder per kind: ``node`` (the daemon and its actor), ``state`` (the state
store), ``supervisor`` (one per session), ``hub``, the adapter host (``adapters``), on ``runtime``.

Each is started as ``python -m roost.actors.<kind>``; the imports go one way only (see
``.importlinter``): hub -> node -> {supervisor, state, adapters} -> runtime -> roost.broker.
"""

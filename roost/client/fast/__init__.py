"""``roost ls``'s fast path (``roost.cli.quick``): node.json, the lock and the token read with
``os`` only (``nodefile``), a ZMTP DEALER without libzmq (``zmtp``), the wire's msgpack in pure
Python (``tinypack``). Beside ``roost.wire.errors`` and ``roost.wire.limits`` these import nothing
of roost, nor pyzmq or msgpack (import-linter holds them to it).
"""

"""The broker: the ROUTER and PUB every roost process meets at (``router``), its peer registry,
admission checks, liveness, a hub's node links, the in-process link and the loop-driven socket.
It speaks ``roost.wire`` and reads the key files through ``roost.client.keys``.
"""

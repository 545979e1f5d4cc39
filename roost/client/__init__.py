"""The client side: where a node keeps its files and how a client finds it (``locate``), the
CURVE key files (``keys``), the synchronous ``Client`` (``client``), and ``roost ls``'s fast path
(``fast``). Nothing is imported here: the fast path passes through this package.
"""

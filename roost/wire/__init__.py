"""The wire format both ends of a connection speak, at the bottom of roost: the stable error
codes (``errors``), the limits (``limits``), the msgpack codec (``codec``), frames, headers and
the catalogue (``protocol``), typed body access (``fields``), addresses and node ids
(``policy``). It imports nothing of roost outside itself. Nothing is imported here: ``roost ls``'s
fast path imports ``errors`` and ``limits`` and must not pay for the rest.
"""

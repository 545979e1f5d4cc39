"""``roost web``: a small web server that is one more client of a node (or a hub).

It serves one page: the live list of records, a terminal per session (xterm.js), the actions of
the CLI and browser notifications. It talks to the node only over the wire protocol, through
``roost.client`` (``backend``); ``security`` holds the checks made before anything listens and on
every request; ``app`` is the aiohttp application. Only ``roost web`` imports this package, so
no other command loads aiohttp.
"""

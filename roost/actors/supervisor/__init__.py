"""One detached process per session: the agent in a PTY (or headless), its screen, turns, checks,
outbox. The node's launcher starts it (``-m roost.actors.supervisor``); it outlives the node.
"""

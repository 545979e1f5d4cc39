"""The node daemon: the broker, the node actor (records, sessions, claims, losses, hub link)
and its children (state store, adapter host). ``roost node up`` starts it: ``-m roost.actors.node``.
"""

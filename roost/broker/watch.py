"""Who watches a session's output: the subscriptions the broker's XPUB sockets report.

A supervisor publishes its session's output (``o/<record>``) only while some subscriber's prefix
matches that topic, and reads its terminal at a slower pace while none does (a session nobody
watches costs the screen, the transcript and the classifier, not a message per read). The broker
learns the subscriptions from its XPUB sockets (one per kind of endpoint: each says when a prefix
gains its first subscriber there and loses its last) and tells each supervisor when its answer
changes, and once when it says hello. On a hub, a node's link is told which of its node's output
topics the hub's clients want (``<node-id>/o/...``, or everything under a shorter prefix), so
that the link subscribes to those alone on its node.
"""

from __future__ import annotations

OUTPUT = "o/"  # the topic prefix of a session's output
SESSION = "session/"  # the address prefix of a session's supervisor


class Subscriptions:
    """The prefixes subscribed on each of the broker's publishing sockets."""

    def __init__(self) -> None:
        self._by_socket: dict[int, set[str]] = {}

    def update(self, via: int, message: bytes) -> bool:
        """One XPUB message (``\\x01`` + prefix: subscribed, ``\\x00`` + prefix: unsubscribed);
        whether the subscribed prefixes changed. Anything else is not a subscription."""
        if not message or message[0] not in (0, 1):
            return False
        prefix = message[1:].decode("utf-8", "replace")
        held = self._by_socket.setdefault(via, set())
        if message[0] == 1:
            if prefix in held:
                return False
            held.add(prefix)
        else:
            if prefix not in held:
                return False
            held.discard(prefix)
        return True

    def prefixes(self) -> set[str]:
        return set().union(*self._by_socket.values()) if self._by_socket else set()

    def watched(self, topic: str) -> bool:
        """Whether a message on ``topic`` reaches a subscriber."""
        return any(topic.startswith(prefix) for prefix in self.prefixes())

    def of_node(self, node: str) -> list[str]:
        """A hub's subscriptions to ``<node>/o/...`` as the node names its topics: ``o/`` when a
        subscriber takes all of the node's output (a prefix of ``<node>/o/``), else each
        ``o/<record>`` prefix asked for; sorted."""
        whole = f"{node}/{OUTPUT}"
        wanted: set[str] = set()
        for prefix in self.prefixes():
            if whole.startswith(prefix):
                return [OUTPUT]
            if prefix.startswith(whole):
                wanted.add(prefix[len(node) + 1 :])
        return sorted(wanted)


def output_topic(address: str) -> str | None:
    """The output topic of the supervisor at ``address`` (``session/<record>``), else None."""
    if address.startswith(SESSION) and len(address) > len(SESSION):
        return OUTPUT + address[len(SESSION) :]
    return None

"""The hub: routes between the nodes of a lab over CurveZMQ and keeps their directory. Started by
``roost hub up`` as ``python -m roost.actors.hub``.
"""

"""The actor runtime every roost process runs on: the broker peer, process start-up and signals,
child processes, line framing, the single-instance lock, endpoint checks. Nothing starts here.
"""

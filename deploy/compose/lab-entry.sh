#!/bin/sh
# The lab's containers (compose.yaml): `lab-entry.sh hub` or `lab-entry.sh node NODE_ID`.
# Keys are exchanged through the shared /lab volume: the hub publishes its public key in
# /lab/hub.public and allows each node key a node leaves in /lab/nodes/<node id>.public (as
# OPERATIONS "A lab" does by hand); each daemon then runs in the foreground as the container's
# main process (`hub up --foreground`) and each node's init (`node run`: the daemon under it).
set -eu
role=${1:?usage: lab-entry.sh hub | node NODE_ID}
mkdir -p /lab/nodes
if [ "$role" = hub ]; then
    state=/home/roost/hub
    roost --state-dir "$state" keys new >/dev/null 2>&1 || true  # an existing pair is kept
    roost --state-dir "$state" --json keys show \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["node_public"])' > /lab/hub.public
    (
        while :; do
            for key in /lab/nodes/*.public; do
                [ -e "$key" ] || continue
                roost --state-dir "$state" keys allow "$(cat "$key")" --role node \
                    --name "$(basename "$key" .public)" >/dev/null 2>&1 || true
            done
            sleep 2
        done
    ) &
    exec roost --state-dir "$state" hub up --foreground --listen tcp://0.0.0.0:7800
fi
node_id=${2:?usage: lab-entry.sh node NODE_ID}
roost keys new >/dev/null 2>&1 || true
roost --json keys show | python3 -c 'import json, sys; print(json.load(sys.stdin)["node_public"])' \
    > "/lab/nodes/$node_id.public"
while [ ! -s /lab/hub.public ]; do sleep 1; done  # the hub's key, once it has published it
# the node's hello is refused until the hub allowed its key; it retries (1, 2, 4 .. 30 s apart)
# `node run` is the container's main process, the daemon its child: a daemon that dies is
# started again under it, and the sessions (the init's, not the daemon's) go on meanwhile
exec roost node run --node-id "$node_id" --hub tcp://hub:7800 \
    --hub-key "$(cat /lab/hub.public)"

#!/usr/bin/env bash
# make cluster: three kitd nodes on loopback, each on its own data
# directory under $DATA (default ./data-cluster), the first with the demo
# workspace. Ctrl-C drains all three (SIGTERM). The cluster key is made on
# the first start and kept in $DATA/cluster-key.
set -euo pipefail
BIN=${BIN:-bin/kitd}
DATA=${DATA:-./data-cluster}
BASE=${BASE:-8080} # HTTP ports BASE, BASE+1, BASE+2
mkdir -p "$DATA"
if [ ! -s "$DATA/cluster-key" ]; then
	umask 077
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DATA/cluster-key"
fi
export KIT_CLUSTER_KEY
KIT_CLUSTER_KEY=$(cat "$DATA/cluster-key")
if [ ! -s "$DATA/operator-token" ]; then
	umask 077
	echo "kop_$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$DATA/operator-token"
fi
TOKEN=$(cat "$DATA/operator-token")
pids=()
stop() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait
}
trap stop INT TERM
gossip=$((BASE + 100))
peer=$((BASE + 200))
for i in 1 2 3; do
	n=$((i - 1))
	args=(serve --node-name "node$i" --data "$DATA/node$i" --listen "127.0.0.1:$((BASE + n))"
		--public-url "http://127.0.0.1:$((BASE + n))" --operator-token "$TOKEN"
		--cluster-bind "127.0.0.1:$((gossip + n))" --peer-listen "127.0.0.1:$((peer + n))"
		--log-level warn)
	if [ "$i" = 1 ]; then
		args+=(--demo)
	else
		args+=(--join "127.0.0.1:$gossip")
	fi
	"$BIN" "${args[@]}" &
	pids+=($!)
	if [ "$i" = 1 ]; then sleep 1; fi
done
echo "three nodes: http://127.0.0.1:$BASE http://127.0.0.1:$((BASE + 1)) http://127.0.0.1:$((BASE + 2))"
echo "any node serves any request; GET /ops/v1/cluster with the operator token shows the members"
wait

#!/usr/bin/env bash
# Wall time of `dpcurator train kernel --variant parallel` (DP-kernel's
# parallel variant, issue 27) on Fashion-MNIST through a local server: one
# server, one dataset of the 60,000 training images, then one training run
# per client binary given, each on its own idempotency key, and a table of
# seconds per run and per class step.
#
#   bench/kernel_parallel_time.sh [--steps T] [--variant V] [--client BIN]...
#                                 [--server BIN]
#
# Defaults: T = 200 session steps per class (the full run is 4,000: scale
# the time by T), --variant parallel (conditional: the image default, one
# session of T steps; its ms column is then per step), the build's client
# and server. Pass --client twice to compare two clients (say, before and
# after a change) on the same server and dataset; --server runs another
# server. Needs the dataset-fashion-mnist package (scripts/dev.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=200
variant=parallel
clients=()
server=build/server/dpcurator-server
data=/usr/share/datasets/fashion-mnist
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --variant) variant="$2"; shift 2 ;;
    --client) clients+=("$2"); shift 2 ;;
    --server) server="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ ${#clients[@]} -gt 0 ]] || clients=(build/client/dpcurator)
for f in "$server" "${clients[@]}"; do
  [[ -x "$f" ]] || { echo "no executable $f: build first (scripts/dev.sh)" >&2; exit 1; }
done
[[ -f "$data/train-images-idx3-ubyte.gz" ]] || {
  echo "no Fashion-MNIST at $data: install dataset-fashion-mnist (scripts/dev.sh)" >&2; exit 1; }

work=$(mktemp -d)
server_pid=
cleanup() { [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
printf 'curator curator-token-bench\nanalyst analyst-token-bench\n' > "$work/tokens"
"$server" --db "$work/db" --tokens "$work/tokens" --insecure-dev --listen 127.0.0.1:0 \
  --port_file "$work/port" 2> "$work/server.log" &
server_pid=$!
for _ in $(seq 100); do [[ -s "$work/port" ]] && break; sleep 0.1; done
[[ -s "$work/port" ]] || { echo "server did not start:" >&2; cat "$work/server.log" >&2; exit 1; }
export DPCURATOR_SERVER=127.0.0.1:$(cat "$work/port") DPCURATOR_INSECURE=1
curator() { DPCURATOR_TOKEN=curator-token-bench "${clients[0]}" "$@"; }
dataset=$(curator datasets create --name fmnist --images 28x28 --classes 10 --epsilon 100 \
  --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["dataset_id"])')
curator upload --dataset "$dataset" --idx "$data/train-images-idx3-ubyte.gz" \
  --labels "$data/train-labels-idx1-ubyte.gz" > /dev/null

# CPU seconds of the server so far (utime + stime, /proc/PID/stat).
server_cpu() {
  python3 -c 'import os,sys; f=open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")",1)[1].split(); print((int(f[11])+int(f[12]))/os.sysconf("SC_CLK_TCK"))' "$server_pid"
}
printf '| client | steps per session | wall s | ms per class step | client CPU s | server CPU s | cores busy | cores |\n'
printf '|---|---|---|---|---|---|---|---|\n'
i=0
for client in "${clients[@]}"; do
  i=$((i + 1))
  cpu0=$(server_cpu)
  start=$(date +%s.%N)
  DPCURATOR_TOKEN=analyst-token-bench /usr/bin/time -f '%U %S' -o "$work/time-$i" "$client" \
    train kernel --dataset "$dataset" --epsilon 1 --rows 60000 --steps "$steps" \
    --variant "$variant" --key "bench-$i" --out "$work/model-$i.pb" --quiet > /dev/null
  end=$(date +%s.%N)
  cpu1=$(server_cpu)
  python3 - "$client" "$steps" "$start" "$end" "$cpu0" "$cpu1" "$work/time-$i" "$variant" <<'EOF'
import os, sys
client, steps = sys.argv[1], int(sys.argv[2])
sessions = 10 if sys.argv[8] == "parallel" else 1
start, end, cpu0, cpu1 = map(float, sys.argv[3:7])
user, system = map(float, open(sys.argv[7]).read().split()[-2:])
wall, client_cpu, server_cpu = end - start, user + system, cpu1 - cpu0
print(f"| {client} | {steps} | {wall:.1f} | {1000 * wall / (sessions * steps):.1f} | "
      f"{client_cpu:.1f} | {server_cpu:.1f} | {(client_cpu + server_cpu) / wall:.2f} | "
      f"{os.cpu_count()} |")
EOF
done

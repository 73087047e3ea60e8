#!/bin/sh
# The basic scenario on redb and on etcd, alternating, in one sitting:
#   cargo build --release -p framework
#   RUNS=3 scripts/bench-etcd.sh [target/release/mesopod]
# Each etcd run gets a fresh single-member etcd ($ETCD, default `etcd` on the
# PATH: .ci/install-etcd.sh installs Debian's etcd-server 3.5; data on disk,
# loopback ports), stopped after the run. Prints every bench line (on etcd it
# ends with etcd_cpu_s, etcd's own CPU over the measured wave), then the
# medians of each store: pods/s and their ratio, and the CPU seconds of the
# wave on each side. etcd shares the machine's cores with mesopod, so when
# both runs are CPU-bound the ratio cannot pass about
# redb_cpu / (redb_cpu + etcd_cpu) even if mesopod's etcd client cost
# nothing; the last line prints that ceiling.
#
# MESOPOD_CPUS and ETCD_CPUS (taskset CPU lists, e.g. MESOPOD_CPUS=0 ETCD_CPUS=1)
# pin mesopod, in both runs, and etcd to CPUs of their own: etcd on cores mesopod
# does not use, as on a machine of its own, so the ratio shows what mesopod's etcd
# client costs rather than what etcd and mesopod cost together. Unset, everything
# shares every core.
set -eu
BIN=${1:-target/release/mesopod}
RUNS=${RUNS:-3}
PORT=${PORT:-23791}
PEER=$((PORT + 10))
ETCD=${ETCD:-etcd}
command -v "$ETCD" >/dev/null || { echo "etcd is missing: .ci/install-etcd.sh" >&2; exit 1; }
"$ETCD" --version | head -1
# Command prefixes that pin (taskset execs its command: etcd keeps the pid $! names).
MESOPOD_CPUS=${MESOPOD_CPUS:-}
ETCD_CPUS=${ETCD_CPUS:-}
pin_mesopod=${MESOPOD_CPUS:+taskset -c $MESOPOD_CPUS}
pin_etcd=${ETCD_CPUS:+taskset -c $ETCD_CPUS}
echo "cpus: mesopod=${MESOPOD_CPUS:-all} etcd=${ETCD_CPUS:-all}"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ "$i" -lt "$RUNS" ]; do
  i=$((i + 1))
  $pin_mesopod "$BIN" bench --scenario basic | grep '^bench ' | tee -a "$out"
  d=$(mktemp -d)
  $pin_etcd "$ETCD" --data-dir "$d/data" --name bench \
    --listen-client-urls "http://127.0.0.1:$PORT" --advertise-client-urls "http://127.0.0.1:$PORT" \
    --listen-peer-urls "http://127.0.0.1:$PEER" --initial-advertise-peer-urls "http://127.0.0.1:$PEER" \
    --initial-cluster "bench=http://127.0.0.1:$PEER" > "$d/etcd.log" 2>&1 &
  pid=$!
  # etcd answers /health once it has elected itself.
  n=0
  until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; do
    n=$((n + 1)); [ "$n" -lt 100 ] || { cat "$d/etcd.log" >&2; exit 1; }
    sleep 0.1
  done
  $pin_mesopod "$BIN" bench --scenario basic --etcd-servers "http://127.0.0.1:$PORT" | grep '^bench ' | tee -a "$out"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$d"
done
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
field() { grep "store=$1" "$out" | sed "s/.* $2=\([0-9.]*\).*/\1/" | median; }
redb=$(field redb pods_per_s)
etcd=$(field etcd pods_per_s)
echo "median pods/s: redb=$redb etcd=$etcd ratio=$(awk -v a="$etcd" -v b="$redb" 'BEGIN {printf "%.2f", a / b}')"
rc=$(field redb cpu_s); ec=$(field etcd cpu_s); xc=$(field etcd etcd_cpu_s)
# The ceiling holds only where etcd and mesopod share the cores.
ceiling=""
[ -n "$ETCD_CPUS" ] || ceiling=" ceiling=$(awk -v r="$rc" -v x="$xc" 'BEGIN {printf "%.2f", r / (r + x)}')"
echo "median wave CPU s: redb run: mesopod=$rc; etcd run: mesopod=$ec etcd=$xc;$ceiling"

#!/bin/sh
# The CNI plugins the pod-networking tests run (bridge, host-local, portmap,
# loopback), the `ip` tool the tests use to look inside a namespace, and
# iptables, which portmap programs. Idempotent.
set -eu
need=""
[ -x /usr/lib/cni/bridge ] || need="$need containernetworking-plugins"
command -v ip >/dev/null 2>&1 || need="$need iproute2"
command -v iptables >/dev/null 2>&1 || need="$need iptables"
command -v nsenter >/dev/null 2>&1 || need="$need util-linux"
if [ -n "$need" ]; then
    apt-get update
    # shellcheck disable=SC2086
    apt-get install -y --no-install-recommends $need
fi

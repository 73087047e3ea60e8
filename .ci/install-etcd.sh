#!/bin/sh
# etcd for the tests that run mesopod's store on etcd (apiserver's store
# suite, tests/tests/etcd_*.rs): Debian's etcd-server, and etcdctl to look
# at what was written. protoc builds etcd-client's gRPC messages. Idempotent.
set -eu
need=""
command -v etcd >/dev/null 2>&1 || need="$need etcd-server"
command -v etcdctl >/dev/null 2>&1 || need="$need etcd-client"
command -v protoc >/dev/null 2>&1 || need="$need protobuf-compiler"
if [ -n "$need" ]; then
    apt-get update
    # shellcheck disable=SC2086
    apt-get install -y --no-install-recommends $need
fi

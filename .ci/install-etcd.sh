#!/bin/sh
# etcd for the tests that run mesopod's store on etcd (apiserver's store
# suite, tests/tests/etcd_*.rs, ha_*.rs) and for scripts/bench-etcd.sh:
# Debian's etcd-server and etcd-client 3.5, and protoc, which builds
# etcd-client's gRPC messages. Idempotent.
#
# etcd 3.5, not bookworm's 3.4.23: 3.5 is the line kubeadm deploys for the
# Kubernetes versions mesopod serves (1.27-1.33), and 3.4 copies its backend's
# whole uncommitted write buffer for every txn (etcd PR 12896, fixed in 3.5),
# which costs a write-heavy client like kube-apiserver or mesopod a third of
# etcd's CPU. On bookworm the packages come from Debian trixie: they are
# static Go binaries that need only libc6 (>= 2.34) and adduser, so they
# install as they are; the system's apt sources are left untouched.
set -eu
want=3.5
has_etcd() {
    command -v "$1" >/dev/null 2>&1 && "$1" --version 2>/dev/null | grep -q "Version: $want\."
}
# protoc alone is not enough: etcd-client's protos import Google's well-known types,
# which live in libprotobuf-dev (a Recommends of protobuf-compiler, so not pulled in).
if ! command -v protoc >/dev/null 2>&1 || [ ! -f /usr/include/google/protobuf/descriptor.proto ]; then
    apt-get update
    apt-get install -y --no-install-recommends protobuf-compiler libprotobuf-dev
fi
if has_etcd etcd && command -v etcdctl >/dev/null 2>&1 && etcdctl version 2>/dev/null | grep -q "etcdctl version: $want\."; then
    exit 0
fi
. /etc/os-release
if [ "${VERSION_CODENAME:-}" != bookworm ]; then
    # A release whose own etcd is 3.5 or later.
    apt-get update
    apt-get install -y --no-install-recommends etcd-server etcd-client
    has_etcd etcd || { echo "install-etcd: this release's etcd is not $want" >&2; exit 1; }
    exit 0
fi
apt-get update
apt-get install -y --no-install-recommends adduser
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    > "$work/trixie.list"
apt_trixie() {
    apt-get -o Dir::Etc::sourcelist="$work/trixie.list" -o Dir::Etc::sourceparts=- \
        -o Dir::State::Lists="$work/lists" "$@"
}
apt_trixie update
(cd "$work" && apt_trixie download etcd-server etcd-client)
# The package's service is not started (no systemd here); tests start their own.
dpkg -i "$work"/etcd-server_*.deb "$work"/etcd-client_*.deb
has_etcd etcd || { echo "install-etcd: etcd $want did not install" >&2; exit 1; }
etcd --version | head -1

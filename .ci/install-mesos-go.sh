#!/usr/bin/env bash
# Installs Go and mesos-go (Debian's golang-github-mesos-mesos-go-dev: the
# library's own source, v1 HTTP API included, under /usr/share/gocode), the
# second third-party scheduler library localmesos' authentication test runs
# (tests/tests/mesos_auth_localmesos.rs builds tests/go/mesosgoauth with it,
# in GOPATH mode: nothing is fetched at test time).
# Idempotent: returns at once when both are there.
set -euo pipefail

SRC=/usr/share/gocode/src/github.com/mesos/mesos-go/api/v1/lib/httpcli/httpsched
if command -v go >/dev/null && [ -d "$SRC" ]; then
    echo "go and mesos-go already installed"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends golang-go golang-github-mesos-mesos-go-dev
go version

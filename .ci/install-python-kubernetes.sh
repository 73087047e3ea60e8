#!/bin/sh
# The official Kubernetes Python client, for the interoperability tests
# (tests/tests/kubectl_objects_clients.rs). Idempotent.
set -eu
if python3 -c 'import kubernetes' 2>/dev/null; then
    exit 0
fi
if ! command -v pip3 >/dev/null 2>&1; then
    apt-get install -y --no-install-recommends python3-pip
fi
pip3 install --break-system-packages kubernetes 2>/dev/null || pip3 install kubernetes

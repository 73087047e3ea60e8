#!/usr/bin/env bash
# Installs Debian's `uidmap` (newuidmap, newgidmap): the rootless pods test
# runs an agent whose user has a subordinate id range (/etc/subuid), which
# mesopod maps into the executor's user namespace with these setuid helpers.
#
# Idempotent: returns at once when both are installed.
set -euo pipefail

if [ -x /usr/bin/newuidmap ] && [ -x /usr/bin/newgidmap ]; then
    echo "uidmap already installed"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y --no-install-recommends uidmap
ls -l /usr/bin/newuidmap /usr/bin/newgidmap

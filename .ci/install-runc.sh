#!/usr/bin/env bash
# Installs what the containers tests need besides the registry's
# (.ci/install-registry.sh): Debian's `runc`, which the tests drive through
# `--container-runtime /usr/sbin/runc` as well as the embedded runtime, and
# `busybox-static`, from which they build the test image.
#
# Idempotent: returns at once when both are installed.
set -euo pipefail

if [ -x /usr/sbin/runc ] && [ -x /bin/busybox ]; then
    echo "runc and busybox-static already installed"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y --no-install-recommends runc busybox-static
/usr/sbin/runc --version

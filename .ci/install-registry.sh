#!/usr/bin/env bash
# Installs what the images crate's tests need: Debian's `docker-registry`
# (CNCF distribution), which the tests start themselves on 127.0.0.1 with a
# temporary storage directory, and `busybox-static`, from which they build
# a small image (one static binary needs no libraries in the image).
#
# The package's systemd unit is not used: the tests start their own
# registries on free ports and end them.
#
# Idempotent: returns at once when both are installed.
set -euo pipefail

if command -v docker-registry >/dev/null 2>&1 && [ -x /bin/busybox ]; then
    echo "docker-registry and busybox-static already installed"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y --no-install-recommends docker-registry busybox-static
command -v docker-registry
file /bin/busybox 2>/dev/null || ls -l /bin/busybox

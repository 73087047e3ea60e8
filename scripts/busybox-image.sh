#!/bin/sh
# Builds a `docker save` tarball of a busybox image from this machine's
# static busybox (Debian's busybox-static), with every applet linked in
# /bin, tagged as the examples name it. With no registry at all:
#
#   scripts/busybox-image.sh busybox.tar
#   mesopod image load busybox.tar        # into <data-dir>/images
#
# Usage: busybox-image.sh OUT.tar [TAG...]   (default tags: 1.36 1.37 latest)
# BUSYBOX=/path/to/busybox picks another static busybox.
set -eu

out=${1:?usage: busybox-image.sh OUT.tar [TAG...]}
shift
[ $# -gt 0 ] || set -- 1.36 1.37 latest
busybox=${BUSYBOX:-/bin/busybox}
if ! "$busybox" --list >/dev/null 2>&1; then
	echo "busybox-image.sh: $busybox does not run (apt-get install busybox-static)" >&2
	exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/proc" "$root/dev" "$root/sys" "$root/root"
cp "$busybox" "$root/bin/busybox"
chmod 0755 "$root/bin/busybox"
for applet in $("$busybox" --list); do
	[ "$applet" = busybox ] || ln -s /bin/busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"

# One layer; fixed owners and times, so the same busybox gives the same digest.
image=$work/image
mkdir -p "$image"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
	-C "$root" -cf "$work/layer.tar" .
layer=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
mkdir -p "$image/$layer"
mv "$work/layer.tar" "$image/$layer/layer.tar"
config='{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:'$layer'"]}}'
printf '%s' "$config" >"$work/config.json"
config_id=$(sha256sum "$work/config.json" | cut -d' ' -f1)
mv "$work/config.json" "$image/$config_id.json"

tags=
for tag in "$@"; do
	tags="$tags${tags:+,}\"busybox:$tag\""
done
printf '[{"Config":"%s.json","RepoTags":[%s],"Layers":["%s/layer.tar"]}]' \
	"$config_id" "$tags" "$layer" >"$image/manifest.json"
tar -C "$image" -cf "$out" .
echo "wrote $out: busybox:$* (layer sha256:$layer)"

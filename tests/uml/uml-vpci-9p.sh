#!/bin/sh
# Linux's virtio_pci and 9pnet_virtio in User-Mode Linux driving iovm's own
# virtio-pci transport and virtio-9p (`iovm vhost-user-pci --share`, two
# functions: a read-write and a read-only share; suite 'uml'): both mount
# with trans=virtio,version=9p2000.L,msize=512000 and the POSIX script the
# 9p-tcp test runs passes on them (tests/guest/9p-posix.sh: names, links,
# modes, xattr-mapped owners, a 10,000-entry readdir, locks, a 64 MiB file
# each way checked by sha256, escapes, the read-only share refusing writes);
# then 20 unbind/rebind of the read-write function and 20 9pnet_virtio
# reloads, each followed by a mount and a read, leave iovm up.
# usage: uml-vpci-9p.sh IOVM LOCKCHECK   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
. "$(dirname "$0")/lib.sh"
uml_require
. "$(dirname "$0")/vpci-lib.sh"
lockcheck=$(realpath "${2:-}" 2>/dev/null) && [ -x "$lockcheck" ] ||
	uml_skip "no 9p-lockcheck binary (pass it as the second argument)"
guestdir=$(cd "$(dirname "$0")/../guest" && pwd)
. "$guestdir/9p-posix-host.sh"

vpci_tmpdir 9p rw ro
p9posix_prepare "$tmp"

# UML's / is the host's (hostfs), so the escape checks could reach the host's
# outside/ through hostfs instead of through 9P: the mounts go on a tmpfs of
# their own, and an empty tmpfs hides outside/ from UML's hostfs view (the
# symlink esc-abs names its host path).
cat >"$tmp/script.sh" <<EOS
set -e
modprobe -d "\$UML_MODULES" virtio_pci
modprobe -d "\$UML_MODULES" 9pnet_virtio
m=\$UML_DIR/mnt
mkdir -p \$m
mount -t tmpfs mnt \$m
mkdir \$m/rw \$m/ro
mount -t tmpfs hide "\$UML_DIR/outside"
opts=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o \$opts rw \$m/rw || { dmesg | tail -20; exit 10; }
mount -t 9p -o \$opts,ro ro \$m/ro || { dmesg | tail -20; exit 11; }
grep ' 9p ' /proc/mounts >mounts.out
sh '$guestdir/9p-posix.sh' \$m/rw \$m/ro '$lockcheck' $P9POSIX_HOST_SHA >posix.out 2>&1 ||
	{ cat posix.out; exit 12; }
umount \$m/rw \$m/ro
umount "\$UML_DIR/outside"
# unbind/rebind of the read-write function, then 9pnet_virtio reloads:
# each cycle tears down and rebuilds the transport, its queue and vectors
rwdev=
for d in /sys/bus/virtio/drivers/9pnet_virtio/virtio*; do
	[ "\$(cat \$d/mount_tag)" = rw ] && rwdev=\$(basename "\$(readlink -f \$d/..)")
done
[ -n "\$rwdev" ] || { echo "no PCI function for the rw tag"; exit 13; }
check() {
	mount -t 9p -o \$opts rw \$m/rw || { echo "mount after \$1 failed"; exit 14; }
	echo "\$1" >\$m/rw/cycle
	[ "\$(cat \$m/rw/cycle)" = "\$1" ] || { echo "read back after \$1"; exit 15; }
	umount \$m/rw
}
for i in \$(seq 20); do
	echo "cycle \$i"
	echo "\$rwdev" >/sys/bus/pci/drivers/virtio-pci/unbind
	echo "\$rwdev" >/sys/bus/pci/drivers/virtio-pci/bind
	check "rebind \$i"
	modprobe -d "\$UML_MODULES" -r 9pnet_virtio
	modprobe -d "\$UML_MODULES" 9pnet_virtio
	check "reload \$i"
done
echo "20 unbind/rebind and 20 9pnet_virtio reloads" >cycles.ok
EOS

vpci_start "$tmp" rw --share "path=$tmp/rw,tag=rw"
dev_rw=$VPCI_DEV
vpci_start "$tmp" ro --share "path=$tmp/ro,tag=ro,ro"
uml_run "$tmp" "$tmp/script.sh" "$dev_rw" "$VPCI_DEV"
st=$?
cat "$tmp/output.log"
vpci_stop rw
vpci_stop ro
if [ "$st" != 0 ]; then
	tail -n 40 "$tmp/console.log"
	echo "--- iovm:"
	tail -n 20 "$tmp/rw.log" "$tmp/ro.log"
	uml_fail "the UML script exited $st"
fi
fail=0
if grep -q 'msize=512000' "$tmp/mounts.out" && [ "$(grep -c ' 9p ' "$tmp/mounts.out")" = 2 ]; then
	echo "ok: both shares mounted: $(tr '\n' ';' <"$tmp/mounts.out")"
else
	cat "$tmp/mounts.out"; echo "FAIL: 9p mounts"; fail=1
fi
if p9posix_check "$tmp" "$tmp/posix.out" >"$tmp/check.out"; then
	echo "ok: 9p POSIX script: $(cat "$tmp/check.out")"
else
	cat "$tmp/check.out" "$tmp/posix.out"; fail=1
fi
if [ -e "$tmp/cycles.ok" ]; then
	echo "ok: $(cat "$tmp/cycles.ok"), each followed by a mount, a write and a read"
else
	echo "FAIL: the rebind/reload loop did not finish"; fail=1
fi
for l in rw ro; do
	if grep -Ei 'error|refus|warn' "$tmp/$l.log" | grep -vq '(0 refused)'; then
		cat "$tmp/$l.log"; echo "FAIL: iovm ($l) logged a problem"; fail=1
	fi
done
echo "ok: UML ran $UML_SECONDS s"
exit $fail

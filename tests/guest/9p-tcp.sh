#!/bin/sh
# The real Linux 9p client against `iovm 9p-serve`: the default guest image
# (Debian's kernel, 9p + 9pnet) under QEMU TCG with user networking mounts
# two shares over TCP (trans=tcp, version=9p2000.L): a read-write one and a
# read-only one. One boot runs a POSIX script: create, write, read, append,
# truncate, rename, link, symlink, readlink, mkdir, rmdir, chmod, chown,
# utimes, stat, readdir of a 10,000-entry folder, statfs, flock and fcntl
# locks, a 64 MiB file each way (sha256 on both sides), escape attempts, and
# refused writes on the read-only share. The host then checks what landed.
# Usage: 9p-tcp.sh IOVM_BINARY GUEST_DIR LOCKCHECK_BINARY
set -eu

iovm=$(realpath "${1:?usage: 9p-tcp.sh IOVM GUEST_DIR LOCKCHECK}")
guest=$(realpath "${2:?usage: 9p-tcp.sh IOVM GUEST_DIR LOCKCHECK}")
lockcheck=$(realpath "${3:?usage: 9p-tcp.sh IOVM GUEST_DIR LOCKCHECK}")
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "SKIPPED: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

[ -r "$guest/vmlinux" ] && [ -r "$guest/initramfs.cpio.gz" ] ||
	skip "no guest image in $guest (run tools/mkguest.sh $guest)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing"

work=$(mktemp -d /tmp/iovm-9p-tcp.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# serve NAME SHARESPEC: iovm 9p-serve on a free loopback port; sets $port.
serve() {
	"$iovm" 9p-serve --share "$2" --listen tcp:127.0.0.1:0 \
		>"$work/$1.out" 2>"$work/$1.log" &
	pids="$pids $!"
	port=
	for _ in $(seq 50); do
		# the background shell may not have created the file yet
		port=$(sed -n 's/^listening on tcp:127\.0\.0\.1:\([0-9]*\)$/\1/p' \
			"$work/$1.out" 2>/dev/null || true)
		[ -n "$port" ] && return 0
		sleep 0.1
	done
	cat "$work/$1.log"
	die "9p-serve $1 did not start"
}

. "$here/9p-posix-host.sh"
p9posix_prepare "$work"

serve rw "path=$work/rw"
rw_port=$port
serve ro "path=$work/ro,ro"
ro_port=$port

# The guest mounts both shares and runs the POSIX script (9p-posix.sh) on them.
cat >"$work/guest.sh" <<EOF
set -e
opts=trans=tcp,version=9p2000.L,msize=512000
mkdir -p /mnt/rw /mnt/ro
mount -t 9p -o \$opts,port=$rw_port 10.0.2.2 /mnt/rw || { echo "GUEST FAIL: mount rw"; exit 1; }
mount -t 9p -o \$opts,port=$ro_port 10.0.2.2 /mnt/ro || { echo "GUEST FAIL: mount ro"; exit 1; }
sh /iovm/9p-posix.sh /mnt/rw /mnt/ro /iovm/lockcheck $P9POSIX_HOST_SHA
umount /mnt/rw /mnt/ro
EOF

cp "$lockcheck" "$work/lockcheck"
"$here/qemu-tcg.sh" -g "$guest" -n -t 600 -m 512M -s "$work/guest.sh" \
	-f "$work/lockcheck:/iovm/lockcheck" -f "$here/9p-posix.sh:/iovm/9p-posix.sh" -l "$work/console" >/dev/null 2>&1 ||
	{ cat "$work/console" "$work/rw.log" "$work/ro.log"; die "guest script failed"; }
p9posix_check "$work" "$work/console" || { cat "$work/console"; die "the host-side checks failed"; }
for l in rw ro; do
	if grep -q "error" "$work/$l.log"; then cat "$work/$l.log"; die "9p-serve $l logged an error"; fi
done
echo PASS

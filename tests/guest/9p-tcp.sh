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

sha() { sha256sum | cut -d' ' -f1; }
MiB=1048576

mkdir -p "$work/rw/big" "$work/ro" "$work/outside"
echo HOSTSECRET >"$work/outside/secret"
ln -s ../outside/secret "$work/rw/esc-rel"
ln -s "$work/outside" "$work/rw/esc-abs"
ln -s .. "$work/rw/esc-up"
# the 10,000-entry folder, made on the host
(cd "$work/rw/big" && seq -f 'entry%05g' 0 9999 | xargs touch)
head -c $((64 * MiB)) /dev/urandom >"$work/rw/host.bin"
host_sha=$(sha <"$work/rw/host.bin")
echo "read-only content" >"$work/ro/keep"
mkdir "$work/ro/dir"
if [ "$(id -u)" = 0 ]; then root=1; else root=0; fi

serve rw "path=$work/rw"
rw_port=$port
serve ro "path=$work/ro,ro"
ro_port=$port

cat >"$work/guest.sh" <<EOF
set -e
fail() { echo "GUEST FAIL: \$*"; exit 1; }
opts=trans=tcp,version=9p2000.L,msize=512000
mkdir -p /mnt/rw /mnt/ro
mount -t 9p -o \$opts,port=$rw_port 10.0.2.2 /mnt/rw || fail "mount rw"
mount -t 9p -o \$opts,port=$ro_port 10.0.2.2 /mnt/ro || fail "mount ro"
cd /mnt/rw
umask 022

# create, write, read, append, truncate
echo hello >a
[ "\$(cat a)" = hello ] || fail "read back"
echo world >>a
[ "\$(cat a)" = "\$(printf 'hello\nworld')" ] || fail "append"
[ "\$(stat -c %s a)" = 12 ] || fail "size after append"
truncate -s 3 a
[ "\$(cat a)" = hel ] || fail "truncate"
truncate -s 8192 a
[ "\$(stat -c %s a)" = 8192 ] || fail "extend"
dd if=/dev/zero of=a bs=1 seek=100 count=10 conv=notrunc 2>/dev/null
[ "\$(stat -c %s a)" = 8192 ] || fail "write inside"
echo "IO OK"

# rename, link, symlink, readlink
mv a b
[ ! -e a ] && [ -f b ] || fail "rename"
mkdir d1 d2
mv b d1/b
mv d1/b d2/c
[ -f d2/c ] || fail "rename across folders"
ln d2/c hard
[ "\$(stat -c %h hard)" = 2 ] || fail "link count"
[ "\$(stat -c %i hard)" = "\$(stat -c %i d2/c)" ] || fail "link inode"
ln -s d2/c soft
[ "\$(readlink soft)" = d2/c ] || fail "readlink"
[ "\$(head -c 3 soft)" = hel ] || fail "read through symlink"
[ -L soft ] || fail "symlink type"
echo "NAMES OK"

# mkdir, rmdir
mkdir -p e/f/g
rmdir e/f/g e/f e
[ ! -e e ] || fail "rmdir"
if rmdir d2 2>/dev/null; then fail "rmdir of a non-empty folder"; fi
echo "DIRS OK"

# chmod, chown, utimes, stat
chmod 0751 hard
[ "\$(stat -c %a hard)" = 751 ] || fail "chmod"
chown 1234:4321 hard
[ "\$(stat -c %u:%g hard)" = 1234:4321 ] || fail "chown"
# a setuid file as the guest sees it (never on the host: see below)
echo x >suid
chmod 6755 suid
[ "\$(stat -c %a suid)" = 6755 ] || fail "chmod 6755"
touch -d '2001-02-03 04:05:06' hard
[ "\$(TZ=UTC stat -c %Y hard)" = 981173106 ] || fail "utimes: \$(stat -c %Y hard)"
echo new >created
[ "\$(stat -c %a created)" = 644 ] || fail "create mode"
echo "ATTRS OK"

# readdir of 10,000 entries, statfs
[ "\$(ls big | wc -l)" = 10000 ] || fail "readdir: \$(ls big | wc -l) entries"
[ "\$(ls big | sort | head -1)" = entry00000 ] || fail "readdir first"
[ "\$(ls big | sort | tail -1)" = entry09999 ] || fail "readdir last"
[ "\$(stat -f -c %b /mnt/rw)" -gt 0 ] || fail "statfs blocks"
echo "READDIR OK"

# flock (whole-file) and fcntl (record) locks
/iovm/lockcheck /mnt/rw/lockfile || fail "locks"
echo "LOCKS OK"

# 64 MiB each way
[ "\$(sha256sum host.bin | cut -d' ' -f1)" = $host_sha ] || fail "host file sha"
dd if=/dev/urandom of=guest.bin bs=1M count=64 2>/dev/null
sync
echo "GUESTSHA \$(sha256sum guest.bin | cut -d' ' -f1)"
echo "BULK OK"

# escape attempts: none reaches the host's outside folder
for p in esc-rel esc-abs/secret esc-up/outside/secret ../outside/secret \
	/mnt/rw/../outside/secret; do
	if cat "\$p" 2>/dev/null | grep -q HOSTSECRET; then fail "escaped via \$p"; fi
done
[ "\$(readlink esc-rel)" = ../outside/secret ] || fail "escaping link unreadable"
if ls /mnt/rw/.. | grep -q outside; then fail "parent listing shows the host"; fi
echo "CONFINED OK"

# the read-only share
[ "\$(cat /mnt/ro/keep)" = "read-only content" ] || fail "ro read"
for cmd in "touch /mnt/ro/new" "mkdir /mnt/ro/new" "rm /mnt/ro/keep" \
	"rmdir /mnt/ro/dir" "mv /mnt/ro/keep /mnt/ro/moved" \
	"chmod 600 /mnt/ro/keep" "ln -s x /mnt/ro/link"; do
	if sh -c "\$cmd" 2>/dev/null; then fail "ro share allowed: \$cmd"; fi
done
if echo x >>/mnt/ro/keep; then fail "ro share allowed an append"; fi
echo "RO OK"

cd /
umount /mnt/rw /mnt/ro
echo "ALL OK"
EOF

cp "$lockcheck" "$work/lockcheck"
"$here/qemu-tcg.sh" -g "$guest" -n -t 600 -m 512M -s "$work/guest.sh" \
	-f "$work/lockcheck:/iovm/lockcheck" -l "$work/console" >/dev/null 2>&1 ||
	{ cat "$work/console" "$work/rw.log" "$work/ro.log"; die "guest script failed"; }
grep -q "ALL OK" "$work/console" || { cat "$work/console"; die "guest did not finish"; }

guest_sha=$(sed -n 's/^GUESTSHA \([0-9a-f]*\).*/\1/p' "$work/console" | tr -d '\r')
[ -n "$guest_sha" ] || die "guest printed no checksum"
[ "$(sha <"$work/rw/guest.bin")" = "$guest_sha" ] || die "guest-written file differs on the host"
# security=mapped-xattr (the default): the files the guest made stay
# iovm's user's at mode 0600 on the host, whatever the guest asked for; the
# guest's owners and modes are in QEMU's user.virtfs.* xattrs
virtfs() {
	python3 -c 'import os, sys; print(int.from_bytes(os.getxattr(sys.argv[1], "user.virtfs." + sys.argv[2]), "little"))' "$work/rw/$1" "$2"
}
me="$(id -u):$(id -g):600"
for f in created hard suid; do
	[ "$(stat -c %u:%g:%a "$work/rw/$f")" = "$me" ] ||
		die "$f is $(stat -c %u:%g:%a "$work/rw/$f") on the host, expected $me"
done
[ "$(virtfs created mode)" = $((0100644)) ] || die "stored mode of a created file"
[ "$(virtfs hard uid):$(virtfs hard gid)" = 1234:4321 ] || die "stored owner after chown"
[ "$(virtfs hard mode)" = $((0100751)) ] || die "stored mode after chmod"
[ "$(virtfs suid mode)" = $((0106755)) ] || die "stored setuid mode"
[ ! -e "$work/outside/stolen" ] && [ "$(cat "$work/outside/secret")" = HOSTSECRET ] ||
	die "outside folder touched"
[ "$(cat "$work/ro/keep")" = "read-only content" ] && [ -d "$work/ro/dir" ] &&
	[ ! -e "$work/ro/new" ] || die "read-only share changed"
for l in rw ro; do
	if grep -q "error" "$work/$l.log"; then cat "$work/$l.log"; die "9p-serve $l logged an error"; fi
done
grep -E '^[A-Z]+ OK' "$work/console" | tr -d '\r' | tr '\n' ' '
echo
echo PASS

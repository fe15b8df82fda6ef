#!/bin/sh
# The POSIX workout of a 9P2000.L client against `iovm 9p-serve`'s file
# system, run inside a real Linux (the TCG guest's 9p over TCP, UML's
# 9pnet_virtio over iovm's virtio-9p): create, write, read, append,
# truncate, rename, link, symlink, readlink, mkdir, rmdir, chmod, chown,
# utimes, stat, readdir of a 10,000-entry folder, statfs, flock and fcntl
# locks, a 64 MiB file each way, escape attempts, refused writes on the
# read-only share. Prints "NAME OK" per part, "GUESTSHA <sha256>" of the file
# it wrote and "ALL OK" at the end; exits non-zero at the first failure.
# The host prepares the shares and checks what landed with 9p-posix-host.sh.
# usage: 9p-posix.sh RW_MOUNT RO_MOUNT LOCKCHECK HOST_SHA256
set -e
rw=${1:?usage: 9p-posix.sh RW_MOUNT RO_MOUNT LOCKCHECK HOST_SHA256}
ro=${2:?usage: 9p-posix.sh RW_MOUNT RO_MOUNT LOCKCHECK HOST_SHA256}
lockcheck=${3:?usage: 9p-posix.sh RW_MOUNT RO_MOUNT LOCKCHECK HOST_SHA256}
host_sha=${4:?usage: 9p-posix.sh RW_MOUNT RO_MOUNT LOCKCHECK HOST_SHA256}
fail() { echo "GUEST FAIL: $*"; exit 1; }

cd "$rw"
umask 022

# create, write, read, append, truncate
echo hello >a
[ "$(cat a)" = hello ] || fail "read back"
echo world >>a
[ "$(cat a)" = "$(printf 'hello\nworld')" ] || fail "append"
[ "$(stat -c %s a)" = 12 ] || fail "size after append"
truncate -s 3 a
[ "$(cat a)" = hel ] || fail "truncate"
truncate -s 8192 a
[ "$(stat -c %s a)" = 8192 ] || fail "extend"
dd if=/dev/zero of=a bs=1 seek=100 count=10 conv=notrunc 2>/dev/null
[ "$(stat -c %s a)" = 8192 ] || fail "write inside"
echo "IO OK"

# rename, link, symlink, readlink
mv a b
[ ! -e a ] && [ -f b ] || fail "rename"
mkdir d1 d2
mv b d1/b
mv d1/b d2/c
[ -f d2/c ] || fail "rename across folders"
ln d2/c hard
[ "$(stat -c %h hard)" = 2 ] || fail "link count"
[ "$(stat -c %i hard)" = "$(stat -c %i d2/c)" ] || fail "link inode"
ln -s d2/c soft
[ "$(readlink soft)" = d2/c ] || fail "readlink"
[ "$(head -c 3 soft)" = hel ] || fail "read through symlink"
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
[ "$(stat -c %a hard)" = 751 ] || fail "chmod"
chown 1234:4321 hard
[ "$(stat -c %u:%g hard)" = 1234:4321 ] || fail "chown"
# a setuid file as the guest sees it (never on the host: see below)
echo x >suid
chmod 6755 suid
[ "$(stat -c %a suid)" = 6755 ] || fail "chmod 6755"
touch -d '2001-02-03 04:05:06' hard
[ "$(TZ=UTC stat -c %Y hard)" = 981173106 ] || fail "utimes: $(stat -c %Y hard)"
echo new >created
[ "$(stat -c %a created)" = 644 ] || fail "create mode"
echo "ATTRS OK"

# readdir of 10,000 entries, statfs
[ "$(ls big | wc -l)" = 10000 ] || fail "readdir: $(ls big | wc -l) entries"
[ "$(ls big | sort | head -1)" = entry00000 ] || fail "readdir first"
[ "$(ls big | sort | tail -1)" = entry09999 ] || fail "readdir last"
[ "$(stat -f -c %b "$rw")" -gt 0 ] || fail "statfs blocks"
echo "READDIR OK"

# flock (whole-file) and fcntl (record) locks
"$lockcheck" "$rw/lockfile" || fail "locks"
echo "LOCKS OK"

# 64 MiB each way
[ "$(sha256sum host.bin | cut -d' ' -f1)" = "$host_sha" ] || fail "host file sha"
dd if=/dev/urandom of=guest.bin bs=1M count=64 2>/dev/null
sync
echo "GUESTSHA $(sha256sum guest.bin | cut -d' ' -f1)"
echo "BULK OK"

# escape attempts: none reaches the host's outside folder
for p in esc-rel esc-abs/secret esc-up/outside/secret ../outside/secret \
	"$rw"/../outside/secret; do
	if cat "$p" 2>/dev/null | grep -q HOSTSECRET; then fail "escaped via $p"; fi
done
[ "$(readlink esc-rel)" = ../outside/secret ] || fail "escaping link unreadable"
if ls "$rw"/.. | grep -q outside; then fail "parent listing shows the host"; fi
echo "CONFINED OK"

# the read-only share
[ "$(cat "$ro"/keep)" = "read-only content" ] || fail "ro read"
for cmd in "touch $ro/new" "mkdir $ro/new" "rm $ro/keep" \
	"rmdir $ro/dir" "mv $ro/keep $ro/moved" \
	"chmod 600 $ro/keep" "ln -s x $ro/link"; do
	if sh -c "$cmd" 2>/dev/null; then fail "ro share allowed: $cmd"; fi
done
if echo x >>"$ro"/keep; then fail "ro share allowed an append"; fi
echo "RO OK"

cd /
echo "ALL OK"

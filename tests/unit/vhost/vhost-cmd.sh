#!/bin/sh
# `iovm vhost-user-blk` as a process: replaces a stale socket, refuses to
# overwrite a file that is not a socket, drops a client that sends garbage
# and serves the next one, exits 0 on SIGTERM (removing its socket), and
# exits by itself after one client with --once; the vhost-user back-end
# conventions (--print-capabilities, --fd, --blk-file, --read-only); a bad
# --test-stop-after count refused. `iovm vhost-user-pci`: one function per
# socket, a missing disk refused before it listens, a client served, SIGTERM.
# Usage: vhost-cmd.sh IOVM
set -eu

iovm=${1:?usage: vhost-cmd.sh IOVM}
command -v python3 >/dev/null || { echo "SKIPPED: python3 missing"; exit 77; }
work=$(mktemp -d /tmp/iovm-vhost-cmd.XXXXXX)
pid=
cleanup() {
	[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
die() { echo "FAIL: $*"; [ ! -f "$work/log" ] || cat "$work/log"; exit 1; }

truncate -s 1M "$work/disk.img"
sock=$work/s.sock

# client MODE: talks to $sock. good: GET_FEATURES must be answered with
# the protocol-features bit; garbage: an unknown request, then the back-end
# must hang up.
client() {
	python3 - "$sock" "$1" <<'EOF'
import socket, struct, sys
path, mode = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(path)
if mode == "good":
    s.sendall(struct.pack("<III", 1, 1, 0))
    hdr = s.recv(12, socket.MSG_WAITALL)
    req, flags, size = struct.unpack("<III", hdr)
    feat, = struct.unpack("<Q", s.recv(8, socket.MSG_WAITALL))
    sys.exit(0 if req == 1 and flags == 5 and size == 8 and feat & (1 << 30) else 1)
s.sendall(struct.pack("<III", 9999, 1, 0))
try:
    sys.exit(0 if s.recv(1) == b"" else 1)
except ConnectionResetError:
    sys.exit(0)
EOF
}

wait_sock() {
	for _ in $(seq 100); do
		[ -S "$sock" ] && return 0
		sleep 0.05
	done
	die "no socket at $sock"
}

# Not a socket: refused, file untouched.
echo keep >"$sock"
if "$iovm" vhost-user-blk --socket "$sock" --disk "path=$work/disk.img" 2>"$work/err"; then
	die "overwrote a regular file at the socket path"
fi
grep -q "exists and is not a socket" "$work/err" || die "unclear error: $(cat "$work/err")"
[ "$(cat "$sock")" = keep ] || die "regular file at the socket path was changed"
rm "$sock"

# A stale socket (left by a dead process) is replaced.
python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$sock"
[ -S "$sock" ] || die "could not make a stale socket"
"$iovm" vhost-user-blk --socket "$sock" --disk "path=$work/disk.img" >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	grep -q "waiting for a client" "$work/log" && break
	sleep 0.05
done
client good || die "first client not served"
client garbage || die "back-end did not hang up on an unknown request"
grep -q "unknown request 9999" "$work/log" || die "no log line naming the bad request"
client good || die "back-end did not serve the client after a bad one"
kill -TERM "$pid"
wait "$pid" || die "exit status $? after SIGTERM"
pid=
[ ! -e "$sock" ] || die "socket left behind after SIGTERM"

# --once: one client, then exit 0.
"$iovm" vhost-user-blk --socket "$sock" --disk "path=$work/disk.img" --once >"$work/log" 2>&1 &
pid=$!
wait_sock
client good || die "--once: client not served"
wait "$pid" || die "--once: exit status $?"
pid=
# The back-end conventions: capabilities, --socket-path/--blk-file/
# --read-only, and a listening socket inherited as --fd (as libvirt does).
"$iovm" vhost-user-blk --print-capabilities | python3 -c '
import json, sys
c = json.load(sys.stdin)
sys.exit(0 if c["type"] == "block" and set(c["features"]) == {"read-only", "blk-file"} else 1)
' || die "--print-capabilities"
"$iovm" vhost-user-scsi --print-capabilities | grep -q '"scsi"' || die "scsi capabilities"
python3 - "$iovm" "$work/disk.img" "$sock" <<'EOF2' >"$work/log" 2>&1 || die "--fd: $(cat "$work/log")"
import os, socket, struct, subprocess, sys, time
iovm, disk, path = sys.argv[1:]
l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
l.bind(path)
l.listen(1)
p = subprocess.Popen([iovm, "vhost-user-blk", "--fd", str(l.fileno()), "--blk-file", disk,
                      "--read-only", "--once"], pass_fds=[l.fileno()])
l.close()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(path)
s.sendall(struct.pack("<III", 1, 1, 0))
req, flags, size = struct.unpack("<III", s.recv(12, socket.MSG_WAITALL))
feat, = struct.unpack("<Q", s.recv(8, socket.MSG_WAITALL))
s.close()
# --read-only: VIRTIO_BLK_F_RO (bit 5) offered.
ok = req == 1 and size == 8 and feat & (1 << 5)
sys.exit(0 if p.wait(timeout=10) == 0 and ok else 1)
EOF2
rm -f "$sock"
# --test-stop-after (test only) wants a count of at least 1.
for bad in 0 -1 x 5x ""; do
	if "$iovm" vhost-user-blk --socket "$sock" --disk "path=$work/disk.img" \
		--test-stop-after "$bad" 2>"$work/err"; then
		die "--test-stop-after '$bad' accepted"
	fi
	grep -q "test-stop-after wants a request count" "$work/err" ||
		die "--test-stop-after '$bad': unclear error: $(cat "$work/err")"
done

# vhost-user-pci: options that make two functions, or none, are refused; a
# disk that cannot be opened is an error before it listens.
for args in "--disk path=$work/disk.img --disk path=$work/disk.img" \
	"--disk path=$work/disk.img,if=lsi --disk path=$work/disk.img" ""; do
	# shellcheck disable=SC2086
	if "$iovm" vhost-user-pci --socket "$sock" $args 2>"$work/err"; then
		die "vhost-user-pci $args accepted"
	fi
	grep -q "one PCI function per socket" "$work/err" ||
		die "vhost-user-pci $args: unclear error: $(cat "$work/err")"
done
if "$iovm" vhost-user-pci --socket "$sock" --disk "path=$work/none.img" 2>"$work/err"; then
	die "vhost-user-pci served a missing disk"
fi
grep -q "none.img" "$work/err" || die "vhost-user-pci: unclear error: $(cat "$work/err")"
[ ! -e "$sock" ] || die "vhost-user-pci listened with a missing disk"
# A client is served (virtio-pcidev offers VERSION_1 and protocol
# features), SIGTERM ends it with status 0 and no socket left.
"$iovm" vhost-user-pci --socket "$sock" --disk "path=$work/disk.img,if=lsi" >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	grep -q "waiting for a client" "$work/log" && break
	sleep 0.05
done
client good || die "vhost-user-pci: client not served"
kill -TERM "$pid"
wait "$pid" || die "vhost-user-pci: exit status $? after SIGTERM"
pid=
[ ! -e "$sock" ] || die "vhost-user-pci: socket left behind after SIGTERM"
echo "PASS"

#!/bin/sh
# I/O limits under a real driver: Linux's virtio_blk (QEMU TCG, the default
# guest image) on `iovm vhost-user-blk --disk ...,iops=N`, fio random reads
# of 4 KiB at queue depth 32, N far below what this guest does unlimited:
#   phase 1: iops=N from the command line: the measured rate over 10 s is
#            within 10% of N (the limiter's upper bound holds by
#            construction; the lower one because the guest asks for more);
#   phase 2: iovm ctl set-limits (the control socket) lifts the limit and sets
#            it again with iops-burst=B: the bucket starts full, so in 10 s
#            the guest does B + 10 N operations (within 10%);
#   phase 3: iovm ctl set-limits disk=disk0 iops=0: the rate is then above
#            3 N.
# query-limits reports the limits between phases (and how many requests
# are held, printed only: that number moves with the guest's timing).
# The guest and this script take turns by construction: the guest writes
# "PHASE k" on its second serial port and waits; the script changes the
# limits, then writes "GO k" into the disk's last sector, which the guest
# polls with O_DIRECT reads.
# Usage: limits.sh IOVM_BINARY GUEST_DIR
set -eu

usage="usage: limits.sh IOVM GUEST_DIR"
iovm=$(realpath "${1:?$usage}")
guest=$(realpath "${2:?$usage}")

. "$(dirname "$(realpath "$0")")/lib.sh"

command -v python3 >/dev/null || skip "python3 missing (the control socket client)"
"$iovm" vhost-user-blk --help 2>&1 | grep -q -- --api-socket ||
	skip "this iovm has no --api-socket"
make_work iovm-limits

N=50		# IOPS: a TCG guest on a loaded host does many times that
B=500		# the burst of phase 2
SECS=10
MiB=1048576
SIZE=$((64 * MiB))
GO_SECTOR=$((SIZE / 512 - 1))

# api JSON: one request on the control socket; prints the reply line.
api() {
	python3 - "$work/api.sock" "$1" <<'EOF'
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(30)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
buf = b""
while True:
    while b"\n" not in buf:
        d = s.recv(65536)
        if not d:
            sys.exit("the control socket closed without a reply")
        buf += d
    line, buf = buf.split(b"\n", 1)
    r = json.loads(line)
    if "return" in r or "error" in r:
        print(line.decode())
        break
EOF
}

# set_limits KEY=VALUE...: iovm ctl set-limits on disk0, which must
# succeed and print disk0's row of limits.
set_limits() {
	r=$("$iovm" ctl --socket "$work/api.sock" set-limits disk=disk0 "$@") ||
		die "iovm ctl set-limits $*: $r"
	echo "iovm ctl set-limits $*:"
	echo "$r"
	echo "$r" | grep -q '^disk0 ' || die "iovm ctl set-limits $*: no row for disk0"
}

# check_limits IOPS BURST: query-limits shows them for disk0.
check_limits() {
	r=$(api '{"execute": "query-limits", "arguments": {"disk": "disk0"}}')
	echo "query-limits -> $r"
	echo "$r" | python3 -c '
import json, sys
r = json.load(sys.stdin)["return"]
want = {"disk": "disk0", "iops": int(sys.argv[1]), "iops-burst": int(sys.argv[2]),
        "iops-rd": 0, "bps": 0, "bps-wr-burst": 0}
got = r[0]
bad = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
if not isinstance(got.get("held"), int):
    bad["held"] = got.get("held")
sys.exit("query-limits: %s" % bad if len(r) != 1 or bad else 0)' "$1" "$2" ||
		die "query-limits does not show iops=$1 iops-burst=$2"
}

truncate -s $SIZE "$work/d.img"
"$iovm" vhost-user-blk --socket "$work/blk.sock" --api-socket "$work/api.sock" \
	--disk "path=$work/d.img,iops=$N" >"$work/blk.log" 2>&1 &
pids="$pids $!"
wait_sock "$work/blk.sock" "$work/blk.log" "vhost-user-blk"
wait_sock "$work/api.sock" "$work/blk.log" "vhost-user-blk's control socket"
check_limits $N $((N / 10))

cat >"$work/guest.sh" <<EOF
set -e
fail() { echo "GUEST FAIL: \$*"; exit 1; }
stty -F /dev/ttyS1 raw -echo 2>/dev/null || true
# run NAME: fio for $SECS s; prints its operations and milliseconds
run() {
	fio --name=\$1 --filename=/dev/vda --direct=1 --ioengine=libaio \\
		--rw=randread --bs=4k --iodepth=32 --size=$((SIZE - MiB)) \\
		--time_based --runtime=$SECS --minimal >/tmp/\$1.out 2>&1 ||
		{ cat /tmp/\$1.out; fail "fio \$1"; }
	# terse: field 6 is KiB read, 9 the read time in ms
	awk -F';' '{ printf "%d %d\n", \$6 / 4, \$9 }' /tmp/\$1.out
}
# turn K: tells the host, waits for its GO in the last sector
turn() {
	echo "PHASE \$1" >/dev/ttyS1
	i=0
	until [ "\$(dd if=/dev/vda bs=512 skip=$GO_SECTOR count=1 iflag=direct 2>/dev/null | head -c 4)" = "GO \$1" ]; do
		i=\$((i + 1))
		[ \$i -lt 3000 ] || fail "no GO \$1 from the host"
		sleep 0.1
	done
}
# within NAME OPS MS EXPECT_OPS_PER_S BASE: OPS within 10% of BASE +
# EXPECT x seconds
within() {
	want=\$((\$5 + \$4 * \$3 / 1000))
	echo "\$1: \$2 ops in \$3 ms (expected \$want)"
	[ \$((\$2 * 10)) -ge \$((want * 9)) ] || fail "\$1: \$2 ops, below 90% of \$want"
	[ \$((\$2 * 10)) -le \$((want * 11)) ] || fail "\$1: \$2 ops, above 110% of \$want"
}
set -- \$(run limited)
within limited \$1 \$2 $N 0
turn 2
set -- \$(run burst)
within burst \$1 \$2 $N $B
turn 3
set -- \$(run free)
echo "free: \$1 ops in \$2 ms"
[ \$((\$1 * 1000)) -gt \$((\$2 * 3 * $N)) ] || fail "free: \$1 ops in \$2 ms, not above 3 x $N/s"
echo "LIMITS OK"
EOF

marks=$work/marks
"$harness" -g "$guest" -s "$work/guest.sh" -m 512M -t 900 -- \
	-object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
	-monitor none -serial stdio -serial "file:$marks" \
	-chardev socket,id=c0,path="$work/blk.sock" \
	-device vhost-user-blk-pci,chardev=c0,num-queues=1 >"$work/guest.console" 2>&1 &
qemu_pid=$!
pids="$pids $!"

# wait_phase K: the guest's PHASE K mark (or its end)
wait_phase() {
	for _ in $(seq 6000); do
		grep -q "PHASE $1" "$marks" 2>/dev/null && return 0
		kill -0 "$qemu_pid" 2>/dev/null || break
		sleep 0.1
	done
	cat "$work/guest.console"
	die "the guest never reached phase $1"
}

go() {
	printf 'GO %s' "$1" | dd of="$work/d.img" bs=512 seek=$GO_SECTOR conv=notrunc 2>/dev/null
}

wait_phase 2
check_limits $N $((N / 10))
# Off and on again: a bucket that was off starts full.
set_limits iops=0
set_limits iops=$N iops-burst=$B
check_limits $N $B
"$iovm" ctl --socket "$work/api.sock" limits | grep -Eq "^disk0 +$N +$B +- " ||
	die "iovm ctl limits does not show iops=$N iops-burst=$B"
go 2
wait_phase 3
set_limits iops=0
check_limits 0 0
go 3

if ! wait "$qemu_pid"; then
	cat "$work/guest.console"
	die "the guest failed"
fi
grep -E '^(limited|burst|free):' "$work/guest.console" | tr -d '\r'
grep -q "LIMITS OK" "$work/guest.console" || die "no LIMITS OK from the guest"
echo "limits: iops=$N held within 10%, a burst of $B honoured, lifted through the control socket"

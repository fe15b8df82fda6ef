#!/bin/sh
# The back-end dies, not the client: Debian's Linux (virtio_blk) under QEMU
# TCG writes to a disk served by `iovm vhost-user-blk` while the back-end is
# SIGKILLed several times and restarted on the same socket. QEMU reconnects
# (-chardev ...,reconnect=1) and hands the new back-end the inflight buffer
# (INFLIGHT_SHMFD); the requests the dead back-end had taken from the ring
# and not completed are run again.
# Nothing here depends on timing. Each killed back-end runs with
# --test-stop-after: after that many completions it completes nothing more,
# so the guest's load piles requests up in flight, and the kill comes once
# the inflight buffer holds at least MIN_HELD of them. Nothing changes the
# buffer between the kill and the next back-end, so the test reads there
# exactly what that back-end must resubmit, and checks that it does (and
# that no push was cut short: the stop leaves none half done).
# Checks: the guest's I/O never fails; fio's crc32c verify of random writes
# made across the kills passes; every write the guest saw complete (O_DIRECT
# + fsync, then a marker on a serial port of its own, ttyS1, which nothing
# else writes to) is in the host file, and there is a marker for each.
# Usage: vhost-user-crash.sh IOVM_BINARY GUEST_DIR
set -eu

usage="usage: vhost-user-crash.sh IOVM GUEST_DIR"
iovm=$(realpath "${1:?$usage}")
guest=$(realpath "${2:?$usage}")

. "$(dirname "$(realpath "$0")")/lib.sh"
command -v python3 >/dev/null || skip "python3 missing"

make_work iovm-vhost-crash
backend=
qemu_pid=
cleanup_more() {
	[ -z "$backend" ] || kill -9 "$backend" 2>/dev/null || true
	[ -z "$qemu_pid" ] || kill -9 "$qemu_pid" 2>/dev/null || true
}

KILLS=3
# Completions each killed back-end makes before it stops. The guest's
# 200 marked writes alone are at least 200 requests, more than the
# KILLS * STOP_AFTER completions before the last stop, so every stop
# comes before the guest is done writing, and so while its load runs (it
# runs until then).
STOP_AFTER=60
# Requests in flight at each kill, at least: the load alone keeps 32
# queued, and none completes once the back-end has stopped.
MIN_HELD=8
# A generous bound for one wait (the guest is emulated, the host loaded):
# reaching it is a failure (a hang), never a retry.
WAIT_S=600
sock=$work/blk.sock
truncate -s 64M "$work/disk.img"

# start_backend N [OPTIONS]: back-end number N (its log: backend.N.log).
start_backend() {
	n=$1
	shift
	rm -f "$sock"
	"$iovm" vhost-user-blk --socket "$sock" --disk "path=$work/disk.img" "$@" \
		>"$work/backend.$n.log" 2>&1 &
	backend=$!
	wait_sock "$sock" "$work/backend.$n.log" "back-end $n"
}

# wait_for WHAT CMD...: polls CMD until it succeeds; after WAIT_S seconds
# (or when the VM is gone) shows the logs and fails naming WHAT.
wait_for() {
	what=$1
	shift
	end=$(($(date +%s) + WAIT_S))
	until "$@"; do
		if [ "$(date +%s)" -ge $end ] || ! kill -0 "$qemu_pid" 2>/dev/null; then
			tail -30 "$work/console"
			for f in "$work"/backend.*.log; do echo "--- $f"; cat "$f"; done
			die "timed out waiting for $what"
		fi
		sleep 0.1
	done
}

cat >"$work/guest.sh" <<'EOF'
fail() { echo "GUEST FAIL: $*"; exit 1; }
# The markers' own port: raw, so that a line is the guest's bytes only.
stty -F /dev/ttyS1 raw -echo 2>/dev/null || true
# Load: 1 MiB writes of zeros at queue depth 32 keep requests coming
# (cheap for the emulated CPU), so they pile up in flight once a back-end
# stops completing. Check: random writes at queue depth 8, each pass
# read back and verified (crc32c).
fio --name=load --filename=/dev/vda --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=1M --iodepth=32 --offset=32M --size=16M --zero_buffers --time_based \
	--runtime=3600 >/dev/null 2>&1 &
load=$!
fio --name=check --filename=/dev/vda --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=64k --iodepth=8 --offset=48M --size=8M --loops=2 \
	--verify=crc32c --do_verify=1 --verify_fatal=1 --minimal >/tmp/fio.out 2>&1 &
fio=$!
i=0
while [ $i -lt 200 ]; do
	dd if=/dev/urandom of=/tmp/c bs=64k count=1 2>/dev/null
	dd if=/tmp/c of=/dev/vda bs=64k seek=$i oflag=direct conv=fsync 2>/dev/null ||
		fail "write $i"
	# (the last close of a tty waits until its output is sent)
	echo "DONE $i $(sha256sum </tmp/c | cut -d' ' -f1)" >/dev/ttyS1
	i=$((i + 1))
done
echo "END $i" >/dev/ttyS1
echo "WRITES DONE"
kill $load
wait $fio || { cat /tmp/fio.out; fail "fio verify"; }
echo "FIO VERIFY OK"
EOF

# The inflight buffer as QEMU holds it (memfd:iovm-inflight; queue 0's
# region): "FLAGGED USED_IDX", or a failure naming what is wrong.
cat >"$work/inflight.py" <<'EOF'
import os, struct, sys
pid = sys.argv[1]
fds = []
for fd in os.listdir("/proc/%s/fd" % pid):
    try:
        target = os.readlink("/proc/%s/fd/%s" % (pid, fd))
    except OSError:
        continue
    if target.startswith("/memfd:iovm-inflight"):
        fds.append(fd)
if len(fds) != 1:
    sys.exit("QEMU (pid %s) holds %d inflight buffers, not 1" % (pid, len(fds)))
with open("/proc/%s/fd/%s" % (pid, fds[0]), "rb") as f:
    d = f.read()
if len(d) < 16:
    sys.exit("inflight buffer of %d bytes" % len(d))
version, num, _, used = struct.unpack_from("<HHHH", d, 8)
if version != 1 or not num or 16 + 16 * num > len(d):
    sys.exit("inflight region: version %d, %d entries, %d bytes" % (version, num, len(d)))
print(sum(1 for i in range(num) if d[16 + 16 * i] == 1), used)
EOF

start_backend 0 --test-stop-after $STOP_AFTER
"$harness" -g "$guest" -s "$work/guest.sh" -m 512M -t 850 -- \
	-object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
	-monitor none -serial stdio -serial "file:$work/marks" \
	-chardev "socket,id=c0,path=$sock,reconnect=1" \
	-device vhost-user-blk-pci,chardev=c0,num-queues=1 >"$work/console" 2>&1 &
qemu_pid=$!

qemu_found() {
	qemu=$(pgrep -f "^qemu-system-x86_64 .*$sock" | head -1)
	[ -n "$qemu" ]
}
wait_for "QEMU to start" qemu_found

# inflight_now: "FLAGGED USED_IDX" from QEMU's copy of the inflight buffer.
inflight_now() {
	python3 "$work/inflight.py" "$qemu"
}
held_enough() {
	h=$(inflight_now) || die "cannot read the inflight buffer"
	[ "${h% *}" -ge $MIN_HELD ]
}
stopped() { grep -q 'test-stop-after: .* completing no more' "$work/backend.$k.log"; }
resubmitted() { grep -q 'resubmitting [0-9]* requests' "$work/backend.$k.log"; }

k=0
summary=
while [ $k -lt $KILLS ]; do
	wait_for "back-end $k to stop completing" stopped
	wait_for "$MIN_HELD requests in flight in back-end $k" held_enough
	kill -9 "$backend"
	wait "$backend" 2>/dev/null || true
	# Frozen until the next back-end starts: what it must resubmit.
	state=$(inflight_now) || die "cannot read the inflight buffer after kill $((k + 1))"
	held=${state% *}
	k=$((k + 1))
	echo "kill $k: back-end SIGKILLed with $held requests in flight" \
		"(inflight buffer: used_idx ${state#* })"
	if [ $k -lt $KILLS ]; then
		start_backend $k --test-stop-after $STOP_AFTER
	else
		start_backend $k
	fi
	wait_for "back-end $k to recover" resubmitted
	got=$(sed -n 's/.*resubmitting \([0-9]*\) requests.*(\([0-9]*\) completions.*/\1 \2/p' \
		"$work/backend.$k.log" | head -1)
	[ "$got" = "$held 0" ] || {
		cat "$work/backend.$k.log"
		die "back-end $k resubmitted/finished '$got'; the buffer held $held in flight, no push cut short"
	}
	summary="$summary $held"
done

if ! wait "$qemu_pid"; then
	qemu_pid=
	tail -30 "$work/console"
	for n in $(seq 0 $KILLS); do echo "--- backend $n"; cat "$work/backend.$n.log"; done
	die "guest failed"
fi
qemu_pid=
grep -q "FIO VERIFY OK" "$work/console" || die "no fio verify from the guest"
# The last back-end drains and flushes when QEMU goes; then SIGTERM.
for _ in $(seq 50); do
	grep -q "client disconnected" "$work/backend.$KILLS.log" && break
	sleep 0.1
done
kill -TERM "$backend"
wait "$backend" || { cat "$work/backend.$KILLS.log"; die "last back-end did not exit cleanly"; }
backend=

# Every marker line must be whole: a write without one was not checked.
tr -d '\r' <"$work/marks" >"$work/marks.txt"
bad=$(grep -cv '^DONE [0-9]* [0-9a-f]\{64\}$\|^END 200$' "$work/marks.txt" || true)
[ "$bad" = 0 ] || { cat "$work/marks.txt"; die "$bad malformed marker lines"; }
[ "$(tail -1 "$work/marks.txt")" = "END 200" ] || die "the guest's markers stop before END 200"
grep '^DONE' "$work/marks.txt" | cut -d' ' -f2 >"$work/acked"
seq 0 199 | cmp -s - "$work/acked" || die "markers are not one per write, 0 to 199, in order"
grep '^DONE' "$work/marks.txt" | while read -r _ i s; do
	got=$(dd if="$work/disk.img" bs=65536 skip="$i" count=1 2>/dev/null |
		sha256sum | cut -d' ' -f1)
	[ "$got" = "$s" ] || echo "$i" >>"$work/lost"
done
[ ! -s "$work/lost" ] ||
	die "writes the guest saw complete are not in the file: $(tr '\n' ' ' <"$work/lost")"
reconnects=$(grep -l "client connected" "$work"/backend.*.log | wc -l)
[ "$reconnects" = $((KILLS + 1)) ] || die "QEMU connected to $reconnects of $((KILLS + 1)) back-ends"
echo "$KILLS back-end kills, with$summary requests in flight; QEMU reconnected each time"
echo "and each new back-end resubmitted exactly those; all 200 completed writes are in the"
echo "file; fio crc32c verify across the kills OK"
echo "PASS"

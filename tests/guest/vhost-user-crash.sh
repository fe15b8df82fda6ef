#!/bin/sh
# The back-end dies, not the client: Debian's Linux (virtio_blk) under QEMU
# TCG writes to a disk served by `iovm vhost-user-blk` while the back-end is
# SIGKILLed several times and restarted on the same socket. QEMU reconnects
# (-chardev ...,reconnect=1) and hands the new back-end the inflight buffer
# (INFLIGHT_SHMFD); the requests the dead back-end had taken from the ring
# and not completed are run again. Checks: the guest's I/O never hangs or
# fails; fio's crc32c verify of random writes made across the kills passes;
# every write the guest saw complete (O_DIRECT + fsync, then a marker on the
# console) is in the host file; the new back-ends resubmit exactly what
# the inflight buffer held at each kill (read from QEMU's copy of it).
# Usage: vhost-user-crash.sh IOVM_BINARY GUEST_DIR
set -eu

usage="usage: vhost-user-crash.sh IOVM GUEST_DIR"
iovm=$(realpath "${1:?$usage}")
guest=$(realpath "${2:?$usage}")

. "$(dirname "$(realpath "$0")")/lib.sh"
command -v python3 >/dev/null || skip "python3 missing"

work=$(mktemp -d /tmp/iovm-vhost-crash.XXXXXX)
backend=
qemu_pid=
cleanup() {
	for q in $(pgrep -f "qemu-system-x86_64 .*$work/" || true); do
		kill -9 "$q" 2>/dev/null || true
	done
	[ -z "$backend" ] || kill -9 "$backend" 2>/dev/null || true
	[ -z "$qemu_pid" ] || kill -9 "$qemu_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

KILLS=3
sock=$work/blk.sock
truncate -s 64M "$work/disk.img"

# start_backend N: back-end number N (its log: $work/backend.N.log).
start_backend() {
	rm -f "$sock"
	"$iovm" vhost-user-blk --socket "$sock" --disk "path=$work/disk.img" \
		>"$work/backend.$1.log" 2>&1 &
	backend=$!
	wait_sock "$sock" "$work/backend.$1.log" "back-end $1"
}

cat >"$work/guest.sh" <<'EOF'
fail() { echo "GUEST FAIL: $*"; exit 1; }
# Load: 1 MiB writes of zeros at queue depth 32 (cheap for the emulated
# CPU, slow enough for the back-end) keep requests in flight in the
# back-end when it is killed. Check: random writes at queue depth 8, each
# pass read back and verified (crc32c).
fio --name=load --filename=/dev/vda --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=1M --iodepth=32 --offset=32M --size=16M --zero_buffers --time_based \
	--runtime=900 >/dev/null 2>&1 &
load=$!
fio --name=check --filename=/dev/vda --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=64k --iodepth=8 --offset=48M --size=8M --loops=8 \
	--verify=crc32c --do_verify=1 --verify_fatal=1 --minimal >/tmp/fio.out 2>&1 &
fio=$!
i=0
while [ $i -lt 200 ]; do
	dd if=/dev/urandom of=/tmp/c bs=64k count=1 2>/dev/null
	dd if=/tmp/c of=/dev/vda bs=64k seek=$i oflag=direct conv=fsync 2>/dev/null ||
		fail "write $i"
	echo "DONE $i $(sha256sum </tmp/c | cut -d' ' -f1)"
	i=$((i + 1))
done
echo "WRITES DONE"
kill $load
wait $fio || { cat /tmp/fio.out; fail "fio verify"; }
echo "FIO VERIFY OK"
EOF

start_backend 0
"$harness" -g "$guest" -s "$work/guest.sh" -m 512M -t 900 -- \
	-object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
	-chardev "socket,id=c0,path=$sock,reconnect=1" \
	-device vhost-user-blk-pci,chardev=c0,num-queues=1 >"$work/console" 2>&1 &
qemu_pid=$!

# done_count: writes the guest has seen complete so far.
done_count() { grep -ac '^DONE' "$work/console" 2>/dev/null || true; }

# inflight_now: requests in flight in the back-end, as its inflight buffer
# says (QEMU keeps it open: memfd:iovm-inflight; queue 0's region).
inflight_now() {
	q=$(pgrep -f "^qemu-system-x86_64 .*$sock" | head -1)
	f=$(ls -l "/proc/$q/fd" 2>/dev/null |
		sed -n 's|.* \([0-9]*\) -> /memfd:iovm-inflight.*|\1|p' | head -1)
	[ -n "$f" ] || { echo 0; return; }
	python3 - "/proc/$q/fd/$f" <<'EOF'
import struct, sys
d = open(sys.argv[1], "rb").read()
num = struct.unpack_from("<H", d, 10)[0]
print(sum(1 for i in range(num) if d[16 + 16 * i] == 1))
EOF
}

# Kill the back-end KILLS times, 15 completed writes apart, restarting it
# on the same socket each time.
k=0
left=0
while [ $k -lt $KILLS ]; do
	want=$(((k + 1) * 15))
	for _ in $(seq 1200); do
		[ "$(done_count)" -ge $want ] && break
		kill -0 "$qemu_pid" 2>/dev/null || break
		sleep 0.25
	done
	[ "$(done_count)" -ge $want ] || { cat "$work/console"; die "guest stalled before kill $((k + 1))"; }
	# Kill while the load has requests in flight (it comes and goes
	# with the guest's scheduling).
	for _ in $(seq 200); do
		[ "$(inflight_now)" -ge 2 ] && break
		sleep 0.05
	done
	kill -9 "$backend"
	wait "$backend" 2>/dev/null || true
	k=$((k + 1))
	# Frozen until the next back-end starts: what it must resubmit.
	n=$(inflight_now)
	left=$((left + n))
	echo "kill $k: back-end SIGKILLed after $(done_count) completed writes," \
		"$n requests in flight"
	start_backend $k
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

done_lines=$(grep -a '^DONE [0-9]* [0-9a-f]\{64\}' "$work/console" | tr -d '\r')
echo "$done_lines" | while read -r _ i s; do
	got=$(dd if="$work/disk.img" bs=65536 skip="$i" count=1 2>/dev/null |
		sha256sum | cut -d' ' -f1)
	[ "$got" = "$s" ] || echo "$i" >>"$work/lost"
done
[ ! -s "$work/lost" ] ||
	die "writes the guest saw complete are not in the file: $(tr '\n' ' ' <"$work/lost")"
resubmitted=$(cat "$work"/backend.*.log |
	sed -n 's/.*resubmitting \([0-9]*\) requests.*/\1/p' | awk '{ n += $1 } END { print n + 0 }')
# The kills wait for requests in flight: a run in which none was caught
# tested nothing. The new back-ends resubmit what the buffers held, less
# at most one push per kill that was cut short (recovery finishes it).
[ "$resubmitted" -gt 0 ] || die "no kill caught a request in flight: resubmission not exercised"
[ "$resubmitted" -le "$left" ] && [ "$resubmitted" -ge $((left - KILLS)) ] ||
	die "$resubmitted requests resubmitted, the buffers held $left"
reconnects=$(grep -l "client connected" "$work"/backend.*.log | wc -l)
[ "$reconnects" = $((KILLS + 1)) ] || die "QEMU connected to $reconnects of $((KILLS + 1)) back-ends"
echo "$KILLS back-end kills; QEMU reconnected each time; $resubmitted requests resubmitted"
echo "from inflight buffers; $(echo "$done_lines" | wc -l) completed writes all in the file;"
echo "fio crc32c verify across the kills OK"
echo "PASS"

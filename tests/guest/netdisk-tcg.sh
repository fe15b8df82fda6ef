#!/bin/sh
# Real Linux drivers on network disks: the default guest (virtio_blk) under
# QEMU TCG drives `iovm vhost-user-blk` whose disk is
#   rbd         an RBD image on a real Ceph cluster started here
#               (tests/ceph/cluster.sh); one OSD is SIGKILLed while the
#               guest's long verified write job runs, and restarted after
#   nbd-qcow2   a qcow2 file served by qemu-nbd on a UNIX socket
#   nbd-memory  nbdkit's memory plugin on a UNIX socket
#   nbd-restart as nbd-qcow2, qemu-nbd SIGKILLed during the long write job
#               and started again on the same socket: iovm reconnects and
#               sends again what was in flight
# The guest runs fio verify=crc32c random writes and reads at 4k and 64k,
# QD1 and QD16, then reports the sha256 of the whole disk; after it powers
# off, the image read on the host (rbd export, qemu-img convert of the
# qcow2 or of the memory export) must have the same sha256.
# Faults that end in errors, with their own guest scripts:
#   nbd-timeout qemu-nbd killed and kept away past timeout=2: the guest's
#               reads fail with EIO, the back-end keeps running, and once
#               qemu-nbd is back the guest's I/O works again
#   nbd-errors  nbdkit's error filter fails 25% of reads with EIO: the
#               guest sees some reads fail and others succeed, the back-end
#               logs and survives
#   nbd-delay   nbdkit's delay filter holds every request 1.5 s: a verified
#               job completes, nothing times out
# Usage: netdisk-tcg.sh KIND IOVM GUEST_DIR
set -eu

usage="usage: netdisk-tcg.sh rbd|nbd-qcow2|nbd-memory|nbd-restart|nbd-timeout|nbd-errors|nbd-delay IOVM GUEST_DIR"
kind=${1:?$usage}
iovm=$(realpath "${2:?$usage}")
guest=$(realpath "${3:?$usage}")
here=$(dirname "$(realpath "$0")")
. "$here/lib.sh"

make_work "iovm-netdisk-$kind"
cleanup_more() {
	[ "$kind" != rbd ] || sh "$here/../ceph/cluster.sh" stop "$work/ceph" >/dev/null 2>&1 || true
}

MiB=1048576
size=$((64 * MiB))

# qemu-nbd serving $work/disk.qcow2 on $work/nbd.sock (daemonised).
start_qnbd() {
	rm -f "$work/nbd.sock"
	qemu-nbd --fork --pid-file "$work/qemu-nbd.pid" -f qcow2 -x disk \
		--socket "$work/nbd.sock" --shared 8 --cache=none --aio=native \
		"$work/disk.qcow2" 2>"$work/qemu-nbd.log" ||
		{ cat "$work/qemu-nbd.log"; die "qemu-nbd did not start"; }
}
kill_qnbd() {
	p=$(cat "$work/qemu-nbd.pid")
	kill -9 "$p"
	while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
}
# wait_console TEXT: until the guest's console has TEXT (or the VM ended).
wait_console() {
	until grep -q "$1" "$work/console" 2>/dev/null; do
		kill -0 $qemu 2>/dev/null || return 1
		sleep 0.2
	done
}
"$iovm" vhost-user-blk --help | grep -q 'nbd+unix' || skip "iovm without network disks"

case $kind in
rbd)
	set +e
	sh "$here/../ceph/cluster.sh" start "$work/ceph"
	rc=$?
	set -e
	[ $rc = 77 ] && skip "no Ceph cluster (see above)"
	[ $rc = 0 ] || die "the Ceph cluster did not start"
	conf=$work/ceph/ceph.conf
	rbd -c "$conf" create iovm/guest --size 64M
	disk="path=rbd:iovm/guest,conf=$conf"
	;;
nbd-qcow2 | nbd-restart | nbd-timeout)
	command -v qemu-nbd >/dev/null || skip "qemu-nbd missing"
	qemu-img create -q -f qcow2 "$work/disk.qcow2" 64M
	start_qnbd
	disk="path=nbd+unix:///disk?socket=$work/nbd.sock"
	[ "$kind" != nbd-timeout ] || disk="$disk,timeout=2"
	;;
nbd-memory | nbd-errors | nbd-delay)
	command -v nbdkit >/dev/null || skip "nbdkit missing"
	filt= params=
	[ "$kind" != nbd-errors ] || { filt=--filter=error; params="error-pread-rate=25% error-pread=EIO"; }
	[ "$kind" != nbd-delay ] || { filt=--filter=delay; params="delay-read=1500ms delay-write=1500ms"; }
	# shellcheck disable=SC2086
	nbdkit -U "$work/nbd.sock" -P "$work/nbdkit.pid" -e disk $filt memory 64M $params \
		2>"$work/nbdkit.log" || { cat "$work/nbdkit.log"; die "nbdkit did not start"; }
	disk="path=nbd+unix:///disk?socket=$work/nbd.sock"
	;;
*) echo "$usage" >&2; exit 2 ;;
esac
for _ in $(seq 100); do
	[ "$kind" = rbd ] || [ -S "$work/nbd.sock" ] && break
	sleep 0.1
done

"$iovm" vhost-user-blk --socket "$work/vblk.sock" --disk "$disk" --once \
	>"$work/backend.log" 2>&1 &
backend=$!
pids="$pids $backend"
wait_sock "$work/vblk.sock" "$work/backend.log" "the back-end"

cat >"$work/guest.sh" <<'EOF2'
set -e
fail() { echo "GUEST FAIL: $*"; exit 1; }
RW=vda
[ "$(cat /sys/block/$RW/size)" = 131072 ] || fail "$RW size $(cat /sys/block/$RW/size)"
job() {
	fio --name=$1 --filename=/dev/$RW --direct=1 --ioengine=libaio \
		--rw=$2 --bs=$3 --iodepth=$4 --offset=$5 --size=$6 \
		--verify=crc32c --do_verify=1 --verify_fatal=1 --minimal \
		>/tmp/$1.out 2>&1 || { cat /tmp/$1.out; fail "fio $1"; }
	echo "FIO $1 OK"
}
job w4k-qd1 randwrite 4k 1 0 2M
job w4k-qd16 randwrite 4k 16 8M 4M
job w64k-qd1 randwrite 64k 1 16M 4M
job w64k-qd16 randwrite 64k 16 24M 4M
job rw4k-qd16 randrw 4k 16 32M 4M
# the host kills an OSD (rbd) once it sees this line
echo "LONG JOB START"
job long64k-qd16 randwrite 64k 16 40M 16M
sync
echo "DISK $(sha256sum </dev/$RW | cut -d' ' -f1)"
EOF2

case $kind in
nbd-timeout)
	cat >"$work/guest.sh" <<'EOF2'
fail() { echo "GUEST FAIL: $*"; exit 1; }
dd if=/dev/urandom of=/tmp/p bs=64k count=1 2>/dev/null
dd if=/tmp/p of=/dev/vda bs=64k seek=10 oflag=direct conv=fsync 2>/dev/null || fail "first write"
echo "KILL THE SERVER"
n=0
while dd if=/dev/vda of=/dev/null bs=4k count=1 skip=$n iflag=direct 2>/dev/null; do
	n=$((n + 1))
	[ $n -lt 600 ] || fail "reads never failed"
	sleep 0.1
done
echo "SAW EIO"
n=0
until dd if=/dev/vda of=/tmp/back bs=64k count=1 skip=10 iflag=direct 2>/dev/null; do
	n=$((n + 1))
	[ $n -lt 300 ] || fail "the disk never came back"
	sleep 0.2
done
cmp /tmp/p /tmp/back || fail "data after the outage"
echo "BACK OK"
fio --name=after --filename=/dev/vda --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=4k --iodepth=8 --size=2M --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--minimal >/tmp/f.out 2>&1 || { cat /tmp/f.out; fail "fio after the outage"; }
echo "FIO after OK"
EOF2
	;;
nbd-errors)
	cat >"$work/guest.sh" <<'EOF2'
ok=0 bad=0
for i in $(seq 0 59); do
	if dd if=/dev/vda of=/dev/null bs=4k count=1 skip=$((i * 7)) iflag=direct 2>/dev/null; then
		ok=$((ok + 1))
	else
		bad=$((bad + 1))
	fi
done
echo "READS ok=$ok failed=$bad"
[ $bad -gt 0 ] && [ $ok -gt 0 ] || { echo "GUEST FAIL: expected some of each"; exit 1; }
dd if=/dev/zero of=/dev/vda bs=4k count=16 oflag=direct conv=fsync 2>/dev/null ||
	{ echo "GUEST FAIL: writes failed (the filter fails reads only)"; exit 1; }
echo "FIO errors OK"
EOF2
	;;
nbd-delay)
	cat >"$work/guest.sh" <<'EOF2'
fio --name=slow --filename=/dev/vda --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=4k --iodepth=8 --size=128k --verify=crc32c --do_verify=1 --verify_fatal=1 \
	--minimal >/tmp/f.out 2>&1 || { cat /tmp/f.out; echo "GUEST FAIL: fio"; exit 1; }
echo "FIO slow OK"
EOF2
	;;
esac
"$harness" -g "$guest" -s "$work/guest.sh" -m 512M -t 900 -- \
	-object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
	-chardev "socket,id=c0,path=$work/vblk.sock" \
	-device vhost-user-blk-pci,chardev=c0,num-queues=1 >"$work/console" 2>&1 &
qemu=$!
pids="$pids $qemu"
# Faults at observable points of the guest's script, not after delays.
case $kind in
rbd)
	if wait_console 'LONG JOB START'; then
		sh "$here/../ceph/cluster.sh" kill-osd "$work/ceph" 1
		echo "osd.1 killed during the guest's write job"
	fi
	;;
nbd-restart)
	if wait_console 'LONG JOB START'; then
		kill_qnbd
		echo "qemu-nbd killed during the guest's write job"
		start_qnbd
	fi
	;;
nbd-timeout)
	if wait_console 'KILL THE SERVER'; then
		kill_qnbd
		wait_console 'SAW EIO' && kill -0 $backend ||
			die "the back-end died while the server was away"
		echo "the guest saw EIO after timeout=2; starting qemu-nbd again"
		start_qnbd
	fi
	;;
esac
if ! wait $qemu; then
	cat "$work/console"
	cat "$work/backend.log"
	die "the guest failed ($kind)"
fi
grep 'FIO .* OK\|READS\|BACK OK' "$work/console" | tr -d '\r'
case $kind in
nbd-timeout | nbd-errors | nbd-delay)
	kill -0 $backend || { cat "$work/backend.log"; die "the back-end died"; }
	kill $backend
	wait $backend || { cat "$work/backend.log"; die "the back-end failed"; }
	if [ $kind = nbd-timeout ]; then
		grep -q 'NBD server unreachable for 2 s' "$work/backend.log" ||
			{ cat "$work/backend.log"; die "no log line for the failed requests"; }
		grep -q 'NBD connection back' "$work/backend.log" || die "no reconnect logged"
	fi
	[ $kind != nbd-errors ] || grep -qi 'error' "$work/backend.log" ||
		{ cat "$work/backend.log"; die "the back-end logged no I/O error"; }
	echo PASS
	exit 0
	;;
esac
want=$(sed -n 's/^DISK \([0-9a-f]*\).*/\1/p' "$work/console" | tr -d '\r')
[ -n "$want" ] || { cat "$work/console"; die "no DISK line from the guest"; }
wait $backend || { cat "$work/backend.log"; die "the back-end failed"; }

case $kind in
rbd)
	sh "$here/../ceph/cluster.sh" start-osd "$work/ceph" 1
	rbd -c "$conf" export iovm/guest "$work/out.raw" >/dev/null 2>&1
	;;
nbd-qcow2 | nbd-restart)
	kill "$(cat "$work/qemu-nbd.pid")"
	while kill -0 "$(cat "$work/qemu-nbd.pid")" 2>/dev/null; do sleep 0.1; done
	qemu-img convert -f qcow2 -O raw "$work/disk.qcow2" "$work/out.raw"
	;;
nbd-memory)
	qemu-img convert -f raw -O raw "nbd+unix:///disk?socket=$work/nbd.sock" "$work/out.raw"
	;;
esac
got=$(sha256sum <"$work/out.raw" | cut -d' ' -f1)
[ "$got" = "$want" ] || die "the image ($kind) holds $got, the guest saw $want"
echo "image sha256 matches the guest's ($kind)"
echo PASS

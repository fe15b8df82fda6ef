#!/bin/sh
# Real Linux drivers on network disks: the default guest (virtio_blk) under
# QEMU TCG drives `iovm vhost-user-blk` whose disk is
#   rbd         an RBD image on a real Ceph cluster started here
#               (tests/ceph/cluster.sh); one OSD is SIGKILLed while the
#               guest's long verified write job runs, and restarted after
#   nbd-qcow2   a qcow2 file served by qemu-nbd on a UNIX socket
#   nbd-memory  nbdkit's memory plugin on a UNIX socket
# The guest runs fio verify=crc32c random writes and reads at 4k and 64k,
# QD1 and QD16, then reports the sha256 of the whole disk; after it powers
# off, the image read on the host (rbd export, qemu-img convert of the
# qcow2, nbdcopy of the memory export) must have the same sha256.
# Usage: netdisk-tcg.sh rbd|nbd-qcow2|nbd-memory IOVM GUEST_DIR
set -eu

usage="usage: netdisk-tcg.sh rbd|nbd-qcow2|nbd-memory IOVM GUEST_DIR"
kind=${1:?$usage}
iovm=$(realpath "${2:?$usage}")
guest=$(realpath "${3:?$usage}")
here=$(dirname "$(realpath "$0")")
. "$here/lib.sh"

work=$(mktemp -d "/tmp/iovm-netdisk-$kind.XXXXXX")
pids=""
cleanup() {
	for q in $(pgrep -f "qemu-system-x86_64 .*$work/" || true); do
		kill -9 "$q" 2>/dev/null || true
	done
	for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
	[ "$kind" != rbd ] || sh "$here/../ceph/cluster.sh" stop "$work/ceph" >/dev/null 2>&1 || true
	for f in "$work"/*.pid; do
		[ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

MiB=1048576
size=$((64 * MiB))
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
nbd-qcow2)
	command -v qemu-nbd >/dev/null || skip "qemu-nbd missing"
	qemu-img create -q -f qcow2 "$work/disk.qcow2" 64M
	qemu-nbd --fork --pid-file "$work/qemu-nbd.pid" -f qcow2 -x disk \
		--socket "$work/nbd.sock" --shared 4 --cache=none --aio=native \
		"$work/disk.qcow2" 2>"$work/qemu-nbd.log" ||
		{ cat "$work/qemu-nbd.log"; die "qemu-nbd did not start"; }
	disk="path=nbd+unix:///disk?socket=$work/nbd.sock"
	;;
nbd-memory)
	command -v nbdkit >/dev/null || skip "nbdkit missing"
	nbdkit -U "$work/nbd.sock" -P "$work/nbdkit.pid" -e disk memory 64M \
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

"$harness" -g "$guest" -s "$work/guest.sh" -m 512M -t 900 -- \
	-object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
	-chardev "socket,id=c0,path=$work/vblk.sock" \
	-device vhost-user-blk-pci,chardev=c0,num-queues=1 >"$work/console" 2>&1 &
qemu=$!
pids="$pids $qemu"
if [ "$kind" = rbd ]; then
	# Observable state, not a delay: the guest says its long job starts.
	until grep -q 'LONG JOB START' "$work/console" 2>/dev/null; do
		kill -0 $qemu 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 $qemu 2>/dev/null; then
		sh "$here/../ceph/cluster.sh" kill-osd "$work/ceph" 1
		echo "osd.1 killed during the guest's write job"
	fi
fi
if ! wait $qemu; then
	cat "$work/console"
	cat "$work/backend.log"
	die "the guest failed ($kind)"
fi
grep 'FIO .* OK' "$work/console" | tr -d '\r'
want=$(sed -n 's/^DISK \([0-9a-f]*\).*/\1/p' "$work/console" | tr -d '\r')
[ -n "$want" ] || { cat "$work/console"; die "no DISK line from the guest"; }
wait $backend || { cat "$work/backend.log"; die "the back-end failed"; }

case $kind in
rbd)
	sh "$here/../ceph/cluster.sh" start-osd "$work/ceph" 1
	rbd -c "$conf" export iovm/guest "$work/out.raw" >/dev/null 2>&1
	;;
nbd-qcow2)
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

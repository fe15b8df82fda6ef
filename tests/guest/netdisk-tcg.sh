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
#   nbd-hang    as nbd-timeout, but a listener that accepts and never
#               answers takes qemu-nbd's socket: reconnect attempts hang in
#               the handshake; each is abandoned after timeout=2, the
#               guest's reads fail with EIO, and once qemu-nbd is back the
#               guest's I/O works again
#   nbd-stop    as nbd-timeout, but qemu-nbd is stopped (SIGSTOP) with its
#               connection open: the connection, owing a reply and hearing
#               none for timeout=2, is cut; the guest's reads fail with EIO;
#               after SIGCONT the guest's I/O works again
#   nbd-shrink  qemu-nbd comes back with the qcow2 file shrunk to 32M: the
#               guest's reads and writes past 32M fail with EIO, those below
#               work and keep their data, the guest's disk stays 64M; then
#               it comes back read-only: writes fail, reads work; each
#               change is logged once
# How the guest's zeroing reaches the server, with nbdkit's log filter:
#   nbd-zero    on virtio-blk (vhost-user-blk), fallocate's ZERO_RANGE (no
#               unmap) is WRITE_ZEROES with NO_HOLE, PUNCH_HOLE (may unmap)
#               is WRITE_ZEROES without it, blkdiscard a TRIM; on SCSI
#               (vhost-user-scsi), WRITE SAME(16) of zeroes without UNMAP
#               is WRITE_ZEROES with NO_HOLE, with UNMAP without it; no
#               FAST_ZERO anywhere; the ranges read back as zeroes
# Usage: netdisk-tcg.sh KIND IOVM GUEST_DIR
set -eu

usage="usage: netdisk-tcg.sh rbd|nbd-qcow2|nbd-memory|nbd-restart|nbd-timeout|nbd-errors|nbd-delay|nbd-hang|nbd-stop|nbd-shrink|nbd-zero IOVM GUEST_DIR"
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

# qemu-nbd serving $work/disk.qcow2 on $work/nbd.sock (daemonised); ARGS
# are more of its options. Writethrough (directsync: O_DIRECT, and every
# write, qcow2's metadata with it, stable before its reply): the kinds
# that SIGKILL the server expect every write it acknowledged to survive,
# which NBD promises only for writes a FLUSH covered. With --cache=none
# (writeback) qemu-nbd keeps new clusters' L2 entries in its memory, and a
# kill lost acknowledged writes (they read back as zeroes: seen in
# nbd-restart, 1 run in 3).
start_qnbd() {
	rm -f "$work/nbd.sock"
	qemu-nbd --fork --pid-file "$work/qemu-nbd.pid" -f qcow2 -x disk \
		--socket "$work/nbd.sock" --shared 8 --cache=directsync --aio=native "$@" \
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
# wait_backend TEXT: until the back-end's log has TEXT (or it ended).
wait_backend() {
	until grep -q "$1" "$work/backend.log" 2>/dev/null; do
		kill -0 $backend 2>/dev/null || return 1
		sleep 0.2
	done
}
# The commands nbd-zero's guest sent, as nbdkit's log filter saw them
# (offsets in hex; trim=1 is a WRITE_ZEROES without NO_HOLE).
check_zero_log() {
	kill $sbackend 2>/dev/null || true
	wait $sbackend || { cat "$work/backend-scsi.log"; die "the SCSI back-end failed"; }
	for want in "blk Zero id=[0-9]* offset=0x100000 .*trim=0 " \
		"blk Zero id=[0-9]* offset=0x200000 .*trim=1 " \
		"blk Trim id=[0-9]* offset=0x300000 " \
		"scsi Zero id=[0-9]* offset=0x100000 count=0x40000 trim=0 " \
		"scsi Zero id=[0-9]* offset=0x200000 count=0x40000 trim=1 "; do
		f=${want%% *}
		grep -q "connection=[0-9]* ${want#* }" "$work/$f.nbdlog" ||
			{ grep 'Zero\|Trim' "$work/$f.nbdlog"; die "nbdkit did not see: $want"; }
	done
	! grep -h 'Zero id=.*fast=1' "$work/blk.nbdlog" "$work/scsi.nbdlog" ||
		die "a zeroing was sent with FAST_ZERO"
	echo "the zeroing commands nbdkit saw are as planned"
}
# hold_socket PATH: a listener on PATH that accepts connections and never
# answers (in the background, its pid in $holder).
hold_socket() {
	python3 -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(64)
open(sys.argv[1] + ".ready", "w").close()
held = []
while True:
    held.append(s.accept()[0])
' "$1" &
	holder=$!
	pids="$pids $holder"
	until [ -e "$1.ready" ]; do
		kill -0 $holder 2>/dev/null || die "the listener on $1 did not start"
		sleep 0.1
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
nbd-qcow2 | nbd-restart | nbd-timeout | nbd-hang | nbd-stop | nbd-shrink)
	command -v qemu-nbd >/dev/null || skip "qemu-nbd missing"
	[ "$kind" != nbd-hang ] || command -v python3 >/dev/null || skip "python3 missing"
	qemu-img create -q -f qcow2 "$work/disk.qcow2" 64M
	# nbd-stop: the same qemu-nbd serves again after SIGCONT, when its
	# one client (the cut connection) is gone: it must not exit then
	if [ "$kind" = nbd-stop ]; then start_qnbd --persistent; else start_qnbd; fi
	disk="path=nbd+unix:///disk?socket=$work/nbd.sock"
	case $kind in nbd-timeout | nbd-hang | nbd-stop) disk="$disk,timeout=2" ;; esac
	;;
nbd-zero)
	command -v nbdkit >/dev/null || skip "nbdkit missing"
	for n in blk scsi; do
		nbdkit -U "$work/$n.sock" -P "$work/nbdkit-$n.pid" -e disk --filter=log \
			memory 64M logfile="$work/$n.nbdlog" 2>"$work/nbdkit.log" ||
			{ cat "$work/nbdkit.log"; die "nbdkit did not start"; }
	done
	disk="path=nbd+unix:///disk?socket=$work/blk.sock"
	sdisk="path=nbd+unix:///disk?socket=$work/scsi.sock"
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
socks=$work/nbd.sock
[ "$kind" != nbd-zero ] || socks="$work/blk.sock $work/scsi.sock"
for s in $socks; do
	for _ in $(seq 100); do
		[ "$kind" = rbd ] || [ -S "$s" ] && break
		sleep 0.1
	done
done

# start_backend blk|scsi NAME DISK: iovm vhost-user-blk or -scsi on
# $work/v$1.sock, its log in $work/NAME.log, its pid in $started.
start_backend() {
	"$iovm" vhost-user-$1 --socket "$work/v$1.sock" --disk "$3" --once \
		>"$work/$2.log" 2>&1 &
	started=$!
	pids="$pids $started"
	wait_sock "$work/v$1.sock" "$work/$2.log" "the $1 back-end"
}
start_backend blk backend "$disk"
backend=$started
extra=""
if [ "$kind" = nbd-zero ]; then
	start_backend scsi backend-scsi "$sdisk"
	sbackend=$started
	extra="-chardev socket,id=c1,path=$work/vscsi.sock -device vhost-user-scsi-pci,chardev=c1,num_queues=1"
fi

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
nbd-timeout | nbd-hang | nbd-stop)
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
nbd-shrink)
	cat >"$work/guest.sh" <<'EOF2'
fail() { echo "GUEST FAIL: $*"; exit 1; }
# at(BYTES) in 64k blocks for dd
M=16
dd if=/dev/urandom of=/tmp/a bs=64k count=1 2>/dev/null
dd if=/tmp/a of=/dev/vda bs=64k seek=$((8 * M)) oflag=direct conv=fsync 2>/dev/null || fail "write at 8M"
dd if=/tmp/a of=/dev/vda bs=64k seek=$((40 * M)) oflag=direct conv=fsync 2>/dev/null || fail "write at 40M"
echo "SHRINK THE EXPORT"
n=0
while dd if=/dev/vda of=/dev/null bs=64k count=1 skip=$((40 * M)) iflag=direct 2>/dev/null; do
	n=$((n + 1))
	[ $n -lt 600 ] || fail "reads past the new end never failed"
	sleep 0.1
done
echo "PAST THE END FAILS"
dd if=/dev/vda of=/tmp/b bs=64k count=1 skip=$((8 * M)) iflag=direct 2>/dev/null || fail "read at 8M"
cmp /tmp/a /tmp/b || fail "the data at 8M changed"
dd if=/dev/urandom of=/tmp/c bs=64k count=1 2>/dev/null
dd if=/tmp/c of=/dev/vda bs=64k seek=$((8 * M + 1)) oflag=direct conv=fsync 2>/dev/null ||
	fail "a write below the new end failed"
dd if=/tmp/c of=/dev/vda bs=64k seek=$((40 * M)) oflag=direct 2>/dev/null &&
	fail "a write past the new end succeeded"
dd if=/dev/vda of=/tmp/d bs=64k count=1 skip=$((8 * M + 1)) iflag=direct 2>/dev/null || fail "read back"
cmp /tmp/c /tmp/d || fail "the write below the new end did not stick"
[ "$(cat /sys/block/vda/size)" = 131072 ] || fail "the guest's disk size changed"
echo "SHRINK OK"
echo "MAKE IT READ-ONLY"
n=0
while dd if=/tmp/c of=/dev/vda bs=64k seek=$((8 * M + 2)) oflag=direct 2>/dev/null; do
	n=$((n + 1))
	[ $n -lt 600 ] || fail "writes to the read-only export never failed"
	sleep 0.1
done
dd if=/dev/vda of=/tmp/e bs=64k count=1 skip=$((8 * M + 1)) iflag=direct 2>/dev/null ||
	fail "a read from the read-only export failed"
cmp /tmp/c /tmp/e || fail "the data read from the read-only export"
echo "READ-ONLY OK"
EOF2
	;;
nbd-zero)
	cat >"$work/guest.sh" <<'EOF2'
fail() { echo "GUEST FAIL: $*"; exit 1; }
SD=$(ls /sys/bus/scsi/devices/0:0:0:0/block/ 2>/dev/null)
[ -n "$SD" ] || fail "no SCSI disk"
K=262144
# zeroes DEV OFFSET: the 256k at OFFSET read back as zeroes
zeroes() {
	[ "$(dd if=/dev/$1 bs=64k skip=$(($2 / 65536)) count=4 iflag=direct 2>/dev/null | sha256sum)" = \
	  "$(dd if=/dev/zero bs=64k count=4 2>/dev/null | sha256sum)" ] || fail "$1 at $2 is not zeroes"
}
dd if=/dev/urandom of=/tmp/r bs=64k count=64 2>/dev/null
for d in vda $SD; do
	dd if=/tmp/r of=/dev/$d bs=64k seek=16 oflag=direct conv=fsync 2>/dev/null || fail "fill $d"
done
# virtio-blk: fallocate's ZERO_RANGE (xfs_io's fzero; the image's own
# fallocate is busybox's) is a WRITE_ZEROES without the UNMAP flag,
# PUNCH_HOLE (fpunch) one with it; blkdiscard a DISCARD
xfs_io -c "fzero 1048576 $K" /dev/vda || fail "fzero"
xfs_io -c "fpunch 2097152 $K" /dev/vda || fail "fpunch"
blkdiscard -o 3145728 -l $K /dev/vda || fail "blkdiscard"
zeroes vda 1048576
zeroes vda 2097152
# SCSI: WRITE SAME(16) of a zero block, without and with UNMAP
sg_write_same --16 --lba=2048 --num=512 /dev/$SD || fail "WRITE SAME"
sg_write_same --16 --unmap --lba=4096 --num=512 /dev/$SD || fail "WRITE SAME with UNMAP"
zeroes $SD 1048576
zeroes $SD 2097152
echo "ZERO OK"
EOF2
	;;
esac
"$harness" -g "$guest" -s "$work/guest.sh" -m 512M -t 900 -- \
	-object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
	-chardev "socket,id=c0,path=$work/vblk.sock" \
	-device vhost-user-blk-pci,chardev=c0,num-queues=1 $extra >"$work/console" 2>&1 &
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
nbd-hang)
	if wait_console 'KILL THE SERVER'; then
		kill_qnbd
		rm -f "$work/nbd.sock"
		hold_socket "$work/nbd.sock"
		echo "qemu-nbd killed; a listener that never answers has its socket"
		wait_console 'SAW EIO' && kill -0 $backend ||
			die "the back-end died while the server was away"
		# an attempt on the listener was abandoned, not waited on for ever
		wait_backend 'no answer from the NBD server within 2 s' ||
			{ cat "$work/backend.log"; die "no attempt was abandoned"; }
		echo "the guest saw EIO, a hung attempt was abandoned; starting qemu-nbd again"
		kill $holder
		wait $holder 2>/dev/null || true
		start_qnbd
	fi
	;;
nbd-stop)
	if wait_console 'KILL THE SERVER'; then
		p=$(cat "$work/qemu-nbd.pid")
		kill -STOP "$p"
		# stopped, every thread, before the guest's next read goes out
		while sed 's/.*) //' /proc/"$p"/task/*/stat | cut -c1 | grep -qv T; do
			sleep 0.05
		done
		echo "qemu-nbd stopped, its connection open"
		wait_console 'SAW EIO' && kill -0 $backend ||
			die "the back-end died while the server was stopped"
		grep -q 'the NBD server has answered none of' "$work/backend.log" ||
			{ cat "$work/backend.log"; die "the silent connection was not cut"; }
		echo "the guest saw EIO, the silent connection was cut; SIGCONT to qemu-nbd"
		kill -CONT "$p"
	fi
	;;
nbd-shrink)
	if wait_console 'SHRINK THE EXPORT'; then
		kill_qnbd
		qemu-img resize -q --shrink -f qcow2 "$work/disk.qcow2" 32M ||
			die "qemu-img resize failed"
		start_qnbd
		echo "qemu-nbd back with the file shrunk to 32M"
	fi
	if wait_console 'MAKE IT READ-ONLY'; then
		kill_qnbd
		start_qnbd --read-only
		echo "qemu-nbd back read-only"
	fi
	;;
esac
if ! wait $qemu; then
	cat "$work/console"
	cat "$work/backend.log"
	die "the guest failed ($kind)"
fi
grep 'FIO .* OK\|READS\|BACK OK\|SHRINK OK\|READ-ONLY OK\|ZERO OK' "$work/console" | tr -d '\r'
case $kind in
nbd-timeout | nbd-errors | nbd-delay | nbd-hang | nbd-stop | nbd-shrink | nbd-zero)
	# --once: it may have left with the guest already; either way it
	# must end well
	kill $backend 2>/dev/null || true
	wait $backend || { cat "$work/backend.log"; die "the back-end failed"; }
	if [ $kind = nbd-timeout ] || [ $kind = nbd-hang ] || [ $kind = nbd-stop ]; then
		grep -q 'NBD server unreachable for 2 s' "$work/backend.log" ||
			{ cat "$work/backend.log"; die "no log line for the failed requests"; }
		grep -q 'NBD connection back' "$work/backend.log" || die "no reconnect logged"
	fi
	[ $kind != nbd-errors ] || grep -qi 'error' "$work/backend.log" ||
		{ cat "$work/backend.log"; die "the back-end logged no I/O error"; }
	if [ $kind = nbd-shrink ]; then
		for what in 'size 67108864 -> 33554432 bytes (requests past its end fail with EIO)' \
			'now read-only (writes fail with EIO)'; do
			[ "$(grep -cF "$what" "$work/backend.log")" = 1 ] ||
				{ cat "$work/backend.log"; die "not logged once: $what"; }
		done
	fi
	[ $kind != nbd-zero ] || check_zero_log
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

#!/bin/bash
# The probe under `iovm run` on network disks: a real Ceph cluster started
# here (tests/ceph/cluster.sh): the probe's virtio-blk, virtio-scsi and LSI
# tests, and a snapshot (read-only, its own data, refused without ro); and, when iovm has NBD support, its virtio-blk test on a qcow2 file
# served by qemu-nbd and its LSI test on nbdkit's memory plugin. Each is
# followed by a check of what the image holds afterwards (rbd export /
# qemu-img convert, not the guest's own read-back). On RBD, one OSD is SIGKILLed while the
# virtio-blk leg runs and restarted after it: the run still passes and the
# data is whole.
# Usage: netdisk-iovm.sh IOVM PROBE_ELF BLK_CHECK
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2 check=$3
here=$(cd "$(dirname "$0")" && pwd)
cluster=$here/../ceph/cluster.sh
need_kvm
make_scratch
cdir=$scratch/ceph
cleanup_ceph() { sh "$cluster" stop "$cdir" >/dev/null 2>&1; }
trap 'cleanup_ceph; rm -rf "$scratch"' EXIT

sh "$cluster" start "$cdir"
rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] || die "the Ceph cluster did not start"
conf=$cdir/ceph.conf
for img in blk:32 s1:32 s2:24 l0:64 l3:64; do
	rbd -c "$conf" create "iovm/${img%:*}" --size "${img#*:}M" ||
		die "rbd create ${img%:*} failed"
done
# lsi_images_ok T0 T3 WHAT: the 64k the LSI test wrote at 1 MiB went to
# target 0's image and not to target 3's.
lsi_images_ok() {
	cmp -s -n 65536 -i 1048576:1048576 "$1" "$2" &&
		die "LSI on $3: both images hold the same data: targets mixed up"
	[ "$(head -c 1114112 "$1" | tail -c 65536 | tr -d '\0' | wc -c)" -gt 0 ] ||
		die "LSI on $3: nothing written to target 0's image"
}
rdisk() { echo "path=rbd:iovm/$1,conf=$conf${2:-}"; }
export_img() {
	rm -f "$scratch/$1.raw"
	rbd -c "$conf" export "iovm/$1" "$scratch/$1.raw" >/dev/null 2>&1 ||
		die "rbd export $1 failed"
}

# virtio-blk; osd.1 dies as soon as the guest's I/O is under way.
run_probe "$scratch/blk.log" 240 "$iovm" run --kernel "$probe" --memory 128M \
	--disk "$(rdisk blk)" --append "test=blk seed=31 mode=poll" &
vm=$!
i=0
until grep -q "probe: blk phase" "$scratch/blk.log" 2>/dev/null || ! kill -0 $vm 2>/dev/null || [ $i -ge 2400 ]; do
	sleep 0.05
	i=$((i + 1))
done
sh "$cluster" kill-osd "$cdir" 1 || die "kill-osd failed"
wait $vm
sh "$cluster" start-osd "$cdir" 1 || die "osd.1 did not come back"
grep -q '^probe: PASS' "$scratch/blk.log" || { cat "$scratch/blk.log"; die "blk on RBD with an OSD killed failed"; }
export_img blk
check_pattern "$scratch/blk.log" blk "$scratch/blk.raw" ||
	die "the RBD image does not hold what the guest wrote (blk)"

# A snapshot (rbd:POOL/IMAGE@SNAP), taken now; then the image is
# overwritten. With ro the probe sees a read-only disk that refuses
# writes and reads the snapshot's data, not the image's later writes;
# without ro it is refused with one line.
rbd -c "$conf" snap create iovm/blk@s1 >/dev/null 2>&1 || die "rbd snap create failed"
rbd -c "$conf" bench --io-type write --io-size 65536 --io-threads 4 --io-total 32M \
	--io-pattern seq iovm/blk >/dev/null 2>&1 || die "rbd bench (overwriting the image) failed"
export_img blk
check_pattern "$scratch/blk.log" blk "$scratch/blk.raw" >/dev/null 2>&1 &&
	die "the image still holds the guest's pattern after being overwritten"
run_probe "$scratch/snap.log" 120 "$iovm" run --kernel "$probe" --memory 128M \
	--disk "$(rdisk blk@s1 ,ro=on)" --append "test=blk-ro \
pattern_seed=$(field "$scratch/blk.log" "probe: blk pattern" seed) \
region_off=$(field "$scratch/blk.log" "probe: blk pattern" offset) \
region=$(field "$scratch/blk.log" "probe: blk pattern" len)"
expect_pass "$scratch/snap.log"
grep -q '^probe: blk-ro pattern .* verified' "$scratch/snap.log" ||
	die "the snapshot's data was not checked"
run_probe "$scratch/snapw.log" 60 "$iovm" run --kernel "$probe" --memory 64M \
	--disk "$(rdisk blk@s1)" --append "test=blk-ro"
grep -q '^probe:' "$scratch/snapw.log" && die "a snapshot without ro was opened"
grep -q "iovm: error: .*rbd:iovm/blk@s1: an RBD snapshot is read-only; add ro" "$scratch/snapw.log" ||
	die "no clear error for a snapshot without ro"

# virtio-scsi, two LUNs on two images.
run_probe "$scratch/vscsi.log" 240 "$iovm" run --kernel "$probe" --memory 128M \
	--disk "$(rdisk s1 ,if=virtio-scsi)" \
	--disk "$(rdisk s2 ,if=virtio-scsi,target=2,lun=1)" \
	--append "test=vscsi seed=32 mode=poll"
expect_pass "$scratch/vscsi.log"
export_img s1
check_pattern "$scratch/vscsi.log" vscsi "$scratch/s1.raw" ||
	die "the RBD image does not hold what the guest wrote (vscsi)"

# LSI, two targets.
run_probe "$scratch/lsi.log" 240 "$iovm" run --kernel "$probe" --memory 128M \
	--disk "$(rdisk l0 ,if=lsi)" --disk "$(rdisk l3 ,if=lsi,target=3)" \
	--append "test=lsi lsi_target=0 lsi_target2=3 qd=16"
expect_pass "$scratch/lsi.log"
export_img l0
export_img l3
lsi_images_ok "$scratch/l0.raw" "$scratch/l3.raw" RBD

# Errors are one clear line naming the image, not a hang or a crash.
run_probe "$scratch/bad.log" 60 "$iovm" run --kernel "$probe" --memory 64M \
	--disk "$(rdisk nosuch)"
grep -q "rbd:iovm/nosuch.*cannot open image nosuch in pool iovm" "$scratch/bad.log" ||
	die "no clear error for a missing image"
run_probe "$scratch/bad2.log" 60 "$iovm" run --kernel "$probe" --memory 64M \
	--disk "path=rbd:nopool/x,conf=$conf"
grep -q "cannot open pool nopool" "$scratch/bad2.log" ||
	die "no clear error for a missing pool"
sh "$cluster" stop "$cdir"

# NBD, when this iovm has it: the probe's virtio-blk test on a qcow2 file
# served by qemu-nbd, and its LSI test on nbdkit's memory plugin.
if ! "$iovm" run --help | grep -q 'nbd+unix'; then
	echo "SKIPPED (NBD part): iovm built without libnbd"
	echo "PASS"
	exit 0
fi
command -v qemu-nbd >/dev/null && command -v nbdkit >/dev/null ||
	die "qemu-nbd and nbdkit are needed (tools/install-deps.sh)"
nbdpids=""
trap 'cleanup_ceph; for p in $nbdpids; do kill -9 "$(cat "$p")" 2>/dev/null; done; rm -rf "$scratch"' EXIT
wait_file() { for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.1; done; die "no socket $1"; }
qemu-img create -q -f qcow2 "$scratch/d.qcow2" 32M
qemu-nbd --fork --pid-file "$scratch/qnbd.pid" -f qcow2 -x d --shared 8 \
	--socket "$scratch/q.sock" "$scratch/d.qcow2" || die "qemu-nbd did not start"
nbdpids="$nbdpids $scratch/qnbd.pid"
wait_file "$scratch/q.sock"
run_probe "$scratch/nblk.log" 240 "$iovm" run --kernel "$probe" --memory 128M \
	--disk "path=nbd+unix:///d?socket=$scratch/q.sock" --append "test=blk seed=33 mode=poll"
expect_pass "$scratch/nblk.log"
kill "$(cat "$scratch/qnbd.pid")"
while kill -0 "$(cat "$scratch/qnbd.pid")" 2>/dev/null; do sleep 0.1; done
qemu-img convert -f qcow2 -O raw "$scratch/d.qcow2" "$scratch/d.raw"
check_pattern "$scratch/nblk.log" blk "$scratch/d.raw" ||
	die "the qcow2 file does not hold what the guest wrote (NBD)"

for t in 0 3; do
	nbdkit -U "$scratch/m$t.sock" -P "$scratch/m$t.pid" -e d memory 64M ||
		die "nbdkit did not start"
	nbdpids="$nbdpids $scratch/m$t.pid"
	wait_file "$scratch/m$t.sock"
done
run_probe "$scratch/nlsi.log" 240 "$iovm" run --kernel "$probe" --memory 128M \
	--disk "path=nbd+unix:///d?socket=$scratch/m0.sock,if=lsi" \
	--disk "path=nbd+unix:///d?socket=$scratch/m3.sock,if=lsi,target=3" \
	--append "test=lsi lsi_target=0 lsi_target2=3 qd=16"
expect_pass "$scratch/nlsi.log"
for t in 0 3; do
	qemu-img convert -f raw -O raw "nbd+unix:///d?socket=$scratch/m$t.sock" "$scratch/m$t.raw" ||
		die "cannot read nbdkit's export back"
done
lsi_images_ok "$scratch/m0.raw" "$scratch/m3.raw" NBD

run_probe "$scratch/nbad.log" 60 "$iovm" run --kernel "$probe" --memory 64M \
	--disk "path=nbd+unix:///d?socket=$scratch/none.sock"
grep -q "nbd+unix:///d?socket=$scratch/none.sock: cannot connect" "$scratch/nbad.log" ||
	die "no clear error for a missing NBD socket"
echo "PASS"

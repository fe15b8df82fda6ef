#!/bin/sh
# Linux's sym53c8xx in User-Mode Linux driving iovm's own LSI 53C895A
# (`iovm vhost-user-pci --disk ...,if=lsi`, UML's PCI over virtio, the chip
# through its memory BAR; suite 'uml'): the disk appears with tagged
# queueing (queue_depth > 1, and iovm saw at least 8 READs and 8 WRITEs in
# flight at once), fio verify=crc32c random writes and reads at 4k, 16k and
# 64k, QD1 and QD16, and sg_inq, sg_readcap and sg_vpd answer.
# usage: uml-vpci-lsi.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
. "$(dirname "$0")/lib.sh"
uml_require
. "$(dirname "$0")/vpci-lib.sh"
command -v sg_inq >/dev/null || uml_skip "sg3-utils missing"

vpci_tmpdir lsi lsi
truncate -s 64M "$tmp/disk.img"

cat >"$tmp/script.sh" <<'EOS'
set -e
. "$UML_TESTS/uml-wait.sh"
modprobe -d "$UML_MODULES" sym53c8xx
uml_wait_disk sd "modprobe sym53c8xx"
[ "$(cat /sys/block/sda/size)" = 131072 ] ||
	{ echo "sda has $(cat /sys/block/sda/size) sectors"; exit 11; }
qd=$(cat /sys/block/sda/device/queue_depth)
echo "queue_depth: $qd"
echo "$qd" >queue_depth
sg_inq /dev/sg0 >sg_inq.out || { cat sg_inq.out; exit 12; }
sg_readcap /dev/sg0 >sg_readcap.out || { cat sg_readcap.out; exit 13; }
sg_vpd --page=0x83 /dev/sg0 >sg_vpd.out || { cat sg_vpd.out; exit 14; }
off=0
for bs in 4k 16k 64k; do
	for qd in 1 16; do
		# random writes, then every block read back and checked
		fio --name=v-$bs-qd$qd --filename=/dev/sda --direct=1 \
			--ioengine=libaio --iodepth=$qd --rw=randwrite --bs=$bs \
			--size=8M --offset=${off}M --verify=crc32c --do_verify=1 \
			--verify_fatal=1 \
			--output-format=terse --terse-version=3 >fio-$bs-qd$qd.out ||
			{ cat fio-$bs-qd$qd.out; echo "fio $bs QD$qd failed"; exit 15; }
		echo "fio $bs QD$qd: written and verified"
		off=$((off + 8))
	done
done
# random reads at QD16 (the verify pass above reads too; this one only reads)
fio --name=r-qd16 --filename=/dev/sda --direct=1 --ioengine=libaio \
	--iodepth=16 --rw=randread --bs=16k --size=48M \
	--output-format=terse --terse-version=3 >fio-read.out ||
	{ cat fio-read.out; echo "fio randread failed"; exit 16; }
# sequential 64k writes and reads at QD16 (the seeds' measure; reported)
for rw in write read; do
	fio --name=seq-$rw --filename=/dev/sda --direct=1 --ioengine=libaio \
		--iodepth=16 --rw=$rw --bs=64k --size=48M \
		--output-format=terse --terse-version=3 >fio-seq-$rw.out ||
		{ cat fio-seq-$rw.out; echo "fio seq $rw failed"; exit 17; }
done
# Unload the HBA while the system runs: left to UML's power-off, sd's last
# SYNCHRONIZE CACHE went out after virt-pci stopped answering (seen: its
# ABORT and resets then timed out against all-ones registers, and UML never
# powered off).
modprobe -d "$UML_MODULES" -r sym53c8xx
EOS

vpci_start "$tmp" lsi --disk "path=$tmp/disk.img,if=lsi"
uml_run "$tmp" "$tmp/script.sh" "$VPCI_DEV"
st=$?
cat "$tmp/output.log"
vpci_stop lsi
if [ "$st" != 0 ]; then
	tail -n 40 "$tmp/console.log"
	echo "--- iovm:"
	tail -n 40 "$tmp/lsi.log"
	uml_fail "the UML script exited $st"
fi
fail=0
qd=$(cat "$tmp/queue_depth")
if [ "$qd" -gt 1 ]; then
	echo "ok: sym53c8xx queue_depth $qd"
else
	echo "FAIL: sym53c8xx queue_depth $qd: no tagged queueing"; fail=1
fi
peak=$(sed -n 's/.*at most \([0-9]*\) READ and \([0-9]*\) WRITE commands.*/\1 \2/p' "$tmp/lsi.log")
set -- $peak
if [ "${1:-0}" -ge 8 ] && [ "${2:-0}" -ge 8 ]; then
	echo "ok: iovm's LSI had up to $1 READs and $2 WRITEs in flight at once"
else
	echo "FAIL: iovm's LSI had at most ${1:-?} READs and ${2:-?} WRITEs in flight at once (want >= 8)"
	fail=1
fi
grep -q 'Vendor identification' "$tmp/sg_inq.out" && echo "ok: sg_inq" || { echo "FAIL: sg_inq"; fail=1; }
grep -q 'Last LBA=131071' "$tmp/sg_readcap.out" && echo "ok: sg_readcap: 131072 blocks" ||
	{ cat "$tmp/sg_readcap.out"; echo "FAIL: sg_readcap"; fail=1; }
[ -s "$tmp/sg_vpd.out" ] && echo "ok: sg_vpd device identification" || { echo "FAIL: sg_vpd"; fail=1; }
for bs in 4k 16k 64k; do
	for qd in 1 16; do
		awk -F';' -v bs=$bs -v qd=$qd '{ printf "ok: %s QD%d randwrite+verify: %d KiB written, %d KiB verified, write %d KiB/s\n", bs, qd, $47, $6, $48 }' \
			"$tmp/fio-$bs-qd$qd.out"
	done
done
awk -F';' '{ printf "ok: 16k QD16 randread %d KiB/s\n", $7 }' "$tmp/fio-read.out"
sw=$(awk -F';' '{ print $48 }' "$tmp/fio-seq-write.out")
sr=$(awk -F';' '{ print $7 }' "$tmp/fio-seq-read.out")
# A throughput ratio depends on the machine's load: reported, not checked.
awk -v w="$sw" -v r="$sr" 'BEGIN { printf "ok: 64k QD16 sequential: write %d KiB/s, read %d KiB/s, write/read %.2f (reported, not checked)\n", w, r, r ? w / r : 0 }'
echo "ok: UML ran $UML_SECONDS s"
exit $fail

#!/bin/sh
# Linux's sym53c8xx in User-Mode Linux driving iovm's own LSI 53C895A
# (`iovm vhost-user-pci --disk ...,if=lsi`, UML's PCI over virtio, the chip
# through its memory BAR; suite 'uml'): the disk appears with tagged
# queueing (queue_depth > 1, and iovm saw at least 8 READs and 8 WRITEs in
# flight at once), fio verify=crc32c random writes and reads at 4k, 16k and
# 64k, QD1 and QD16, and sg_inq, sg_readcap and sg_vpd answer; 20
# unbind/rebind of the function and 20 sym53c8xx reloads, each followed by
# sg_inq and a verified write, leave iovm up and the disk working.
# And a SCSI bus reset (sg_reset -b) in the middle of I/O loses no completed
# write: iovm runs with --test-hold-writes 64:16, so after fio's first 64
# 4k WRITEs (QD16, merges off: one command per write) the next 16, all fio
# has in flight, sit in io_uring behind a gate, disconnected at the LSI.
# The UML script resets the bus when iovm logs that (it reads iovm's log
# through hostfs); this host script sends SIGUSR1, which opens the gate,
# when the LSI logs that its target waits for the aborted WRITEs (or, from
# a model that does not wait, once fio has finished writing). Then fio
# --verify_only checks every block of the range, the kernel must have
# logged the reset, and iovm the 16 commands aborted with I/O in flight.
# No step waits on time: each acts on a log line or a file of the other.
# usage: uml-vpci-lsi.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
. "$(dirname "$0")/lib.sh"
uml_require
. "$(dirname "$0")/vpci-lib.sh"
command -v sg_inq >/dev/null || uml_skip "sg3-utils missing"

vpci_tmpdir lsi lsi
command -v sg_reset >/dev/null || uml_skip "sg_reset (sg3-utils) missing"
truncate -s 64M "$tmp/disk.img"

cat >"$tmp/script.sh" <<'EOS'
set -e
# A failed run unloads the HBA, so that commands it left stuck do not hold
# up UML's power-off (a passing one leaves the driver bound: UML's
# power-off then flushes sd's cache through it, tools/uml/patches/0005).
trap 'st=$?; [ $st = 0 ] || modprobe -d "$UML_MODULES" -r sym53c8xx 2>/dev/null; exit $st' EXIT
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
# --- a SCSI bus reset in the middle of I/O (first: iovm counts WRITEs from
# its start, and holds those after the first 64 of them).
# Waits (up to 120 s, a bound for failures only) for a line in a log.
wait_line() {
	n=0
	until grep -q "$2" "$1" 2>/dev/null; do
		n=$((n + 1))
		[ $n -le 1200 ] || { echo "no '$2' in $1 after 120 s"; exit 20; }
		sleep 0.1
	done
}
[ "$qd" -ge 16 ] || { echo "queue_depth $qd: the reset test needs 16 WRITEs in flight"; exit 21; }
# One SCSI WRITE per fio write: the held 16 are all fio has in flight.
nomerges=$(cat /sys/block/sda/queue/nomerges)
echo 2 >/sys/block/sda/queue/nomerges
rjob="--name=reset --filename=/dev/sda --direct=1 --ioengine=libaio \
	--iodepth=16 --rw=randwrite --bs=4k --size=8M --offset=48M \
	--verify=crc32c --verify_fatal=1 --output-format=terse --terse-version=3"
fio $rjob --do_verify=0 >fio-reset-write.out 2>fio-reset-write.err &
fpid=$!
# iovm holds WRITEs 65 to 80 in flight (queued in io_uring behind a gate):
# fio's 16 commands are all at the LSI, disconnected, when it says so.
wait_line "$UML_DIR/lsi.log" "16 WRITEs held in flight"
sg_reset -N -b /dev/sg0 >sg_reset.out 2>&1 || { cat sg_reset.out; exit 22; }
echo reset >reset.sent
# The host releases the held WRITEs once iovm says the target waits for
# them, or once fio has finished writing (what a model that does not wait
# lets it do: the old WRITEs then land over the retried ones).
wait $fpid || { cat fio-reset-write.out fio-reset-write.err; echo "fio write across the reset failed"; exit 23; }
touch writes.done
wait_line "$UML_DIR/lsi.log" "commands aborted have finished their backend I/O"
echo "$nomerges" >/sys/block/sda/queue/nomerges
# Every block of the range as fio wrote it, after the reset.
fio $rjob --verify_only >fio-reset-verify.out 2>fio-reset-verify.err ||
	{ cat fio-reset-verify.out fio-reset-verify.err; echo "data lost across the bus reset"; exit 24; }
dmesg >dmesg-reset.out
echo "bus reset in the middle of 4k QD16 writes: written and verified"
off=0
for bs in 4k 16k 64k; do
	for qd in 1 16; do
		# random writes, then every block read back and checked
		uml_fio_verify /dev/sda $bs-qd$qd $bs $qd ${off}M 8M
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
# unbind/rebind and driver reload, 20 times each: every cycle resets the
# chip and the bus, scans the target again and sends it commands
bdf=$(basename "$(readlink -f /sys/block/sda | sed 's,/host[0-9]*/.*,,')")
for i in $(seq 20); do
	echo "cycle $i"
	echo "$bdf" >/sys/bus/pci/drivers/sym53c8xx/unbind
	echo "$bdf" >/sys/bus/pci/drivers/sym53c8xx/bind
	uml_check_sd "rebind $i"
	modprobe -d "$UML_MODULES" -r sym53c8xx
	modprobe -d "$UML_MODULES" sym53c8xx
	uml_check_sd "reload $i"
done
echo "20 unbind/rebind and 20 sym53c8xx reloads" >cycles.ok
EOS

# The host's half of the reset test: SIGUSR1 releases the WRITEs iovm
# holds, once the LSI says its target waits for them (or the guest's
# writing has ended without that). Events only: lines in iovm's log, files
# the UML script makes.
release_held() {
	until grep -q "answers once they have finished" "$tmp/lsi.log" ||
		[ -e "$tmp/writes.done" ]; do
		kill -0 "$vpci_pid_lsi" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -USR1 "$vpci_pid_lsi"
	echo released >"$tmp/released"
}
cleanup() {
	# a failed run may leave WRITEs held: iovm drains them on SIGTERM
	[ -n "${vpci_pid_lsi:-}" ] && kill -USR1 "$vpci_pid_lsi" 2>/dev/null
	[ -n "${rpid:-}" ] && kill "$rpid" 2>/dev/null
	vpci_cleanup
}
trap cleanup EXIT

vpci_start "$tmp" lsi --disk "path=$tmp/disk.img,if=lsi" --test-hold-writes 64:16
release_held &
rpid=$!
uml_run "$tmp" "$tmp/script.sh" "$VPCI_DEV"
st=$?
cat "$tmp/output.log"
kill "$rpid" 2>/dev/null
wait "$rpid" 2>/dev/null
rpid=
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
# The bus reset in the middle of I/O.
grep -E 'test-hold-writes|lsi: .*(reset|abort)' "$tmp/lsi.log"
if grep -q 'test-hold-writes: 16 WRITEs held in flight' "$tmp/lsi.log" &&
	[ -e "$tmp/reset.sent" ]; then
	echo "ok: sg_reset -b while iovm held 16 WRITEs in flight"
else
	echo "FAIL: the bus reset did not come while 16 WRITEs were held"; fail=1
fi
ab=$(sed -n 's/.*lsi: [a-zA-Z ]*reset: \([0-9]*\) commands aborted; \([0-9]*\) aborted commands have backend I\/O in flight.*/\1 \2/p' \
	"$tmp/lsi.log" | awk '{ a += $1; if ($2 > b) b = $2 } END { print a + 0, b + 0 }')
set -- $ab
if [ "$1" -ge 16 ] && [ "$2" -ge 16 ]; then
	echo "ok: iovm's LSI aborted $1 commands in the reset, $2 with backend I/O in flight"
else
	echo "FAIL: iovm's LSI logged $1 commands aborted, $2 with backend I/O in flight (want >= 16)"
	fail=1
fi
if grep -q 'answers once they have finished' "$tmp/lsi.log"; then
	echo "ok: target 0 took no command until the aborted WRITEs had finished"
else
	echo "FAIL: target 0 took commands while the aborted WRITEs were still in flight"; fail=1
fi
if grep -q 'SCSI BUS reset detected' "$tmp/dmesg-reset.out" &&
	grep -q 'BUS RESET operation complete' "$tmp/dmesg-reset.out"; then
	echo "ok: the kernel logged the bus reset: $(grep -c 'SCSI BUS reset detected' "$tmp/dmesg-reset.out") x 'SCSI BUS reset detected'"
else
	grep -i reset "$tmp/dmesg-reset.out"
	echo "FAIL: no bus reset in the kernel's log"; fail=1
fi
awk -F';' '{ printf "ok: bus reset in the middle of 4k QD16 randwrite: %d KiB written, ", $47 }' \
	"$tmp/fio-reset-write.out"
awk -F';' '{ printf "%d KiB verified after it (fio --verify_only)\n", $6 }' \
	"$tmp/fio-reset-verify.out"
[ -e "$tmp/cycles.ok" ] && echo "ok: $(cat "$tmp/cycles.ok"), each followed by sg_inq and a verified write" ||
	{ echo "FAIL: the rebind/reload loop did not finish"; fail=1; }
echo "ok: UML ran $UML_SECONDS s"
exit $fail

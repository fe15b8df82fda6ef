#!/bin/sh
# Real Linux drivers against `iovm vhost-user-blk` or `iovm vhost-user-scsi`:
# the default guest image (Debian's kernel: virtio_blk, or virtio_scsi + sd)
# under QEMU TCG, its disks served by iovm over vhost-user.
#   boot 1: a read-write and a read-only disk appear with the right sizes
#           (scsi: sg_inq, sg_vpd, sg_readcap report iovm's disk; sdparm
#           and the kernel's cache_type switch write-through on and off); fio
#           verify=crc32c (random writes, read back) at 4k and 64k, QD1 and
#           QD16, and mixed random read/write; blkdiscard zeroes; the
#           read-only disk refuses writes; after poweroff the host file holds
#           exactly what the guest saw (sha256 of the whole disk).
#   boot 2: QEMU is SIGKILLed in the middle of writes; every write the guest
#           saw complete (O_DIRECT + fsync, then a marker on a serial port of
#           its own, ttyS1, which kernel messages and QEMU's output never
#           share) is in the file, and the back-end survives.
#   boot 3: a new QEMU (2 vCPUs, 2 request queues) connects to the same
#           back-end and reads those writes back from both CPUs, its guest
#           RAM a file on /dev/shm (memory-backend-file, share=on: a tmpfs
#           file that cannot be sealed, which the back-end must accept) and
#           a fio verify on top; the back-end then exits cleanly on SIGTERM.
#   boot 4: only when the host has free huge pages: the same fio verify
#           with guest RAM on hugetlbfs; otherwise the log says SKIPPED and
#           why (the test still passes).
# Usage: vhost-user.sh blk|scsi IOVM_BINARY GUEST_DIR
set -eu

usage="usage: vhost-user.sh blk|scsi IOVM GUEST_DIR"
type=${1:?$usage}
iovm=$(realpath "${2:?$usage}")
guest=$(realpath "${3:?$usage}")
case "$type" in blk|scsi) ;; *) echo "$usage" >&2; exit 2 ;; esac

. "$(dirname "$(realpath "$0")")/lib.sh"

make_work "iovm-vhost-$type"
shm=
cleanup_more() {
	[ -z "$shm" ] || rm -rf "$shm"
}

MiB=1048576

# start_backend NAME ARGS...: iovm vhost-user-$type on $work/NAME.sock
start_backend() {
	name=$1
	shift
	"$iovm" "vhost-user-$type" --socket "$work/$name.sock" "$@" \
		>"$work/$name.log" 2>&1 &
	eval "pid_$name=$!"
	pids="$pids $!"
	wait_sock "$work/$name.sock" "$work/$name.log" "back-end $name"
}

# boot NAME SCRIPT BACKEND...: runs SCRIPT in the guest under QEMU TCG
# (tests/guest/qemu-tcg.sh) with one vhost-user PCI device per backend, in
# the background; the console goes to $work/NAME.console. Sets $qemu_pid (of
# the harness, which exits with the guest script's status). $queues request
# queues per device, with as many vCPUs; $marks, if set, a file that gets
# the guest's second serial port (ttyS1); $mem the guest RAM's memory
# backend (QEMU -object; id=mem, 512M, shared with the back-end).
queues=1
marks=
mem=memory-backend-memfd,id=mem,size=512M,share=on
boot() {
	name=$1 script=$2
	shift 2
	devs=""
	nb=0
	for b in "$@"; do
		devs="$devs -chardev socket,id=c$nb,path=$work/$b.sock"
		if [ "$type" = blk ]; then
			devs="$devs -device vhost-user-blk-pci,chardev=c$nb,num-queues=$queues"
		else
			devs="$devs -device vhost-user-scsi-pci,chardev=c$nb,num_queues=$queues"
		fi
		nb=$((nb + 1))
	done
	# The guest script first finds its disks: $RW and $RO.
	if [ "$type" = blk ]; then
		echo 'RW=vda RO=vdb' >"$work/$name.guest.sh"
	else
		cat >"$work/$name.guest.sh" <<'EOF'
disk() { ls /sys/bus/scsi/devices/$1/block/ 2>/dev/null; }
RW=$(disk '0:0:0:0') RO=$(disk '0:0:1:0')
EOF
	fi
	cat "$script" >>"$work/$name.guest.sh"
	[ -z "$marks" ] || devs="-monitor none -serial stdio -serial file:$marks $devs"
	# shellcheck disable=SC2086
	"$harness" -g "$guest" -s "$work/$name.guest.sh" -m 512M -p "$queues" -t 600 -- \
		-object "$mem" \
		-numa node,memdev=mem $devs >"$work/$name.console" 2>&1 &
	qemu_pid=$!
	pids="$pids $!"
}

# wait_guest NAME: waits for the VM to end; the guest script must pass.
wait_guest() {
	if ! wait "$qemu_pid"; then
		cat "$work/$1.console"
		die "guest $1 failed"
	fi
}

sha() { sha256sum | cut -d' ' -f1; }

# --- boot 1: the functional checks -----------------------------------------
truncate -s 64M "$work/rw.img"
# Non-zero data where the guest will discard, so that the discard shows.
dd if=/dev/urandom of="$work/rw.img" bs=$MiB seek=40 count=4 conv=notrunc 2>/dev/null
head -c $((16 * MiB)) /dev/urandom >"$work/ro.img"
ro_sha=$(sha <"$work/ro.img")

cat >"$work/boot1.sh" <<EOF
set -e
fail() { echo "GUEST FAIL: \$*"; exit 1; }
[ -n "\$RW" ] && [ -n "\$RO" ] || fail "disks missing: '\$RW' '\$RO'"
[ "\$(cat /sys/block/\$RW/size)" = 131072 ] || fail "\$RW size \$(cat /sys/block/\$RW/size)"
[ "\$(cat /sys/block/\$RO/size)" = 32768 ] || fail "\$RO size"
[ "\$(cat /sys/block/\$RO/ro)" = 1 ] || fail "\$RO is not read-only"
[ "\$(cat /sys/block/\$RW/ro)" = 0 ] || fail "\$RW is read-only"
echo "DISKS OK \$RW \$RO"
if [ $type = scsi ]; then
	sg_inq /dev/\$RW >/tmp/inq || fail "sg_inq"
	grep -q "Vendor identification: IOVM" /tmp/inq || { cat /tmp/inq; fail "sg_inq vendor"; }
	grep -q "Peripheral device type: disk" /tmp/inq || fail "sg_inq device type"
	sg_readcap /dev/\$RW >/tmp/cap || fail "sg_readcap"
	grep -q "Number of logical blocks=131072" /tmp/cap || { cat /tmp/cap; fail "sg_readcap capacity"; }
	grep -q "Logical block length=512 bytes" /tmp/cap || fail "sg_readcap block size"
	sg_vpd /dev/\$RW >/tmp/vpd || fail "sg_vpd"
	grep -qi "unit serial number" /tmp/vpd || { cat /tmp/vpd; fail "sg_vpd: no serial number page"; }
	sg_vpd -p sn /dev/\$RW | grep -q "Unit serial number: ." || fail "sg_vpd serial"
	sg_vpd -p di /dev/\$RW >/dev/null || fail "sg_vpd device identification"
	[ "\$(sg_vpd -p sn /dev/\$RW)" != "\$(sg_vpd -p sn /dev/\$RO)" ] || fail "serials equal"
	echo "SG OK"
	# write-through: sdparm clears WCE (MODE SELECT), it reads back, and
	# verified writes work with it; Linux's own cache_type switch too
	wce() { sdparm --get=WCE /dev/\$RW 2>/dev/null | awk '\$1 == "WCE" { print \$2 }'; }
	[ "\$(wce)" = 1 ] || fail "WCE is '\$(wce)' at start"
	sdparm -q --clear=WCE /dev/\$RW || fail "sdparm --clear=WCE"
	[ "\$(wce)" = 0 ] || fail "WCE is '\$(wce)' after sdparm --clear=WCE"
	fio --name=wt --filename=/dev/\$RW --direct=1 --ioengine=libaio --rw=randwrite \\
		--bs=4k --iodepth=8 --offset=44M --size=1M --verify=crc32c --do_verify=1 \\
		--verify_fatal=1 --minimal >/tmp/wt.out 2>&1 || { cat /tmp/wt.out; fail "fio write-through"; }
	sdparm -q --set=WCE /dev/\$RW || fail "sdparm --set=WCE"
	[ "\$(wce)" = 1 ] || fail "WCE is '\$(wce)' after sdparm --set=WCE"
	ct=\$(echo /sys/block/\$RW/device/scsi_disk/*/cache_type)
	echo "write through" >\$ct || fail "cache_type write through"
	[ "\$(cat \$ct)" = "write through" ] && [ "\$(wce)" = 0 ] || fail "cache_type: \$(cat \$ct) WCE \$(wce)"
	echo "write back" >\$ct || fail "cache_type write back"
	[ "\$(wce)" = 1 ] || fail "WCE not back on"
	echo "WCE OK"
fi
job() {
	fio --name=\$1 --filename=/dev/\$RW --direct=1 --ioengine=libaio \\
		--rw=\$2 --bs=\$3 --iodepth=\$4 --offset=\$5 --size=4M \\
		--verify=crc32c --do_verify=1 --verify_fatal=1 --minimal \\
		>/tmp/\$1.out 2>&1 || { cat /tmp/\$1.out; fail "fio \$1"; }
	echo "FIO \$1 OK"
}
job w4k-qd1 randwrite 4k 1 0
job w4k-qd16 randwrite 4k 16 8M
job w64k-qd1 randwrite 64k 1 16M
job w64k-qd16 randwrite 64k 16 24M
job rw4k-qd16 randrw 4k 16 32M
job rw64k-qd16 randrw 64k 16 36M
blkdiscard -o $((40 * MiB)) -l $((4 * MiB)) /dev/\$RW || fail "blkdiscard"
nz=\$(dd if=/dev/\$RW bs=1M skip=40 count=4 iflag=direct 2>/dev/null | tr -d '\\000' | wc -c)
[ "\$nz" = 0 ] || fail "\$nz non-zero bytes after discard"
echo "DISCARD OK"
if dd if=/dev/zero of=/dev/\$RO bs=4k count=1 oflag=direct 2>/dev/null; then
	fail "write to the read-only disk succeeded"
fi
[ "\$(sha256sum </dev/\$RO | cut -d' ' -f1)" = $ro_sha ] || fail "\$RO content"
echo "RO OK"
dd if=/dev/urandom of=/tmp/pat bs=1M count=4 2>/dev/null
dd if=/tmp/pat of=/dev/\$RW bs=1M seek=48 oflag=direct conv=fsync 2>/dev/null
sync
echo "DISK \$(sha256sum </dev/\$RW | cut -d' ' -f1)"
EOF
if [ "$type" = blk ]; then
	start_backend rw --disk "path=$work/rw.img" --once
	start_backend ro --disk "path=$work/ro.img,ro" --once
	boot boot1 "$work/boot1.sh" rw ro
	backends="rw ro"
else
	start_backend hba --disk "path=$work/rw.img,target=0" \
		--disk "path=$work/ro.img,ro,target=1" --once
	boot boot1 "$work/boot1.sh" hba
	backends=hba
fi
wait_guest boot1
for b in $backends; do
	eval "p=\$pid_$b"
	wait "$p" || { cat "$work/$b.log"; die "backend $b exited with an error"; }
done
guest_sha=$(sed -n 's/^DISK \([0-9a-f]*\).*/\1/p' "$work/boot1.console" | tr -d '\r')
[ -n "$guest_sha" ] || die "guest printed no disk checksum"
[ "$(sha <"$work/rw.img")" = "$guest_sha" ] ||
	die "host file differs from what the guest saw"
[ "$(sha <"$work/ro.img")" = "$ro_sha" ] || die "read-only disk changed"
if [ "$type" = scsi ]; then
	grep -q "SG OK" "$work/boot1.console" || die "no SG OK from the guest"
	grep -q "WCE OK" "$work/boot1.console" || die "no WCE OK from the guest"
fi
echo "boot 1: disks, fio verify, discard, read-only and host content OK"

# --- boot 2: the client dies in the middle of writes ------------------------
truncate -s 64M "$work/kill.img"
cat >"$work/boot2.sh" <<'EOF'
# The markers' own port: raw, so that a line is the guest's bytes only.
stty -F /dev/ttyS1 raw -echo 2>/dev/null || true
# Background load keeps requests in flight when QEMU dies.
fio --name=bg --filename=/dev/$RW --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=64k --iodepth=16 --offset=32M --size=32M --time_based --runtime=600 \
	>/dev/null 2>&1 &
i=0
while [ $i -lt 400 ]; do
	dd if=/dev/urandom of=/tmp/c bs=64k count=1 2>/dev/null
	dd if=/tmp/c of=/dev/$RW bs=64k seek=$i oflag=direct conv=fsync 2>/dev/null || exit 1
	echo "DONE $i $(sha256sum </tmp/c | cut -d' ' -f1)" >/dev/ttyS1
	i=$((i + 1))
done
EOF
if [ "$type" = blk ]; then
	start_backend kill --disk "path=$work/kill.img,queues=2"
else
	# target 1 stays empty: the RO lookup finds nothing, unused here.
	start_backend kill --disk "path=$work/kill.img,target=0,queues=2"
fi
marks=$work/boot2.marks
boot boot2 "$work/boot2.sh" kill
marks=
for _ in $(seq 600); do
	c=$(grep -c '^DONE' "$work/boot2.marks" 2>/dev/null) || c=0
	[ "$c" -ge 20 ] && break
	kill -0 "$qemu_pid" 2>/dev/null || break
	sleep 0.5
done
# SIGKILL QEMU itself (not the harness around it): found by the socket
# path, unique to this test run.
qemu=$(pgrep -f "qemu-system-x86_64 .*path=$work/kill.sock" || true)
[ -n "$qemu" ] || { cat "$work/boot2.console"; die "QEMU of boot 2 is not running"; }
kill -9 $qemu
wait "$qemu_pid" 2>/dev/null || true
# Every marker line must be whole but the last, which the kill may cut (its
# write is then not checked); they are one per write, 0 up, in order.
tr -d '\r' <"$work/boot2.marks" >"$work/boot2.marks.txt"
[ -z "$(tail -c 1 "$work/boot2.marks.txt")" ] || sed -i '$d' "$work/boot2.marks.txt"
bad=$(grep -cv '^DONE [0-9]* [0-9a-f]\{64\}$' "$work/boot2.marks.txt" || true)
[ "$bad" = 0 ] || { cat "$work/boot2.marks.txt"; die "$bad malformed marker lines"; }
done_lines=$(cat "$work/boot2.marks.txt")
[ "$(echo "$done_lines" | wc -l)" -ge 20 ] || {
	cat "$work/boot2.console"
	die "guest completed fewer than 20 writes before the kill"
}
n=$(echo "$done_lines" | wc -l)
seq 0 $((n - 1)) >"$work/seq"
echo "$done_lines" | cut -d' ' -f2 | cmp -s - "$work/seq" ||
	{ cat "$work/boot2.marks.txt"; die "markers are not one per write, 0 up, in order"; }
# The back-end notices the hang-up, drains and flushes; it must stay up.
for _ in $(seq 50); do
	grep -q "client disconnected" "$work/kill.log" && break
	sleep 0.1
done
kill -0 "$pid_kill" || die "backend died with its client"
echo "$done_lines" | while read -r _ i s; do
	got=$(dd if="$work/kill.img" bs=65536 skip="$i" count=1 2>/dev/null | sha)
	[ "$got" = "$s" ] || echo "$i" >>"$work/lost"
done
[ ! -s "$work/lost" ] || {
	cat "$work/kill.log"
	die "writes the guest saw complete are not in the file: $(tr '\n' ' ' <"$work/lost")"
}
echo "boot 2: QEMU killed after $n completed writes; all of them are in the file"

# A verified random write, used by boots 3 and 4 (other memory backends).
cat >"$work/fio-verify.sh" <<'EOF'
fio --name=mem --filename=/dev/$RW --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=4k --iodepth=16 --offset=40M --size=2M --verify=crc32c --do_verify=1 \
	--verify_fatal=1 --minimal >/tmp/mem.out 2>&1 || { cat /tmp/mem.out; echo "GUEST FAIL: fio"; exit 1; }
echo "FIO OK"
EOF

# --- boot 3: a new client on the same back-end reads them back --------------
# Two vCPUs and two request queues: the chunks are checked from both CPUs,
# so both queues carry requests.
{
	echo 'set -e'
	echo '[ "$(ls /sys/block/$RW/mq | wc -l)" = 2 ] || { echo "GUEST FAIL: not 2 queues"; exit 1; }'
	echo "cat >/tmp/check.sh <<'EOS'"
	echo "$done_lines" | while read -r _ i s; do
		echo "[ \$((\$1 % 2)) = $((i % 2)) ] || [ \"\$(dd if=/dev/\$2 bs=64k skip=$i count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)\" = $s ] || { echo 'GUEST FAIL: chunk $i'; exit 1; }"
	done
	echo 'EOS'
	echo 'pin() { if command -v taskset >/dev/null; then taskset -c "$@"; else shift; "$@"; fi; }'
	echo 'pin 0 sh /tmp/check.sh 0 $RW & p0=$!'
	echo 'pin 1 sh /tmp/check.sh 1 $RW & p1=$!'
	echo 'wait $p0 && wait $p1'
	echo 'echo "VERIFY OK"'
	cat "$work/fio-verify.sh"
} >"$work/boot3.sh"
queues=2
# Guest RAM a plain tmpfs file (QEMU makes and unlinks it in mem-path).
shm=$(mktemp -d /dev/shm/iovm-vhost-mem.XXXXXX)
mem="memory-backend-file,id=mem,size=512M,share=on,mem-path=$shm"
# refused: what the back-end logs from here on
refused() { tail -n +$(($1 + 1)) "$work/kill.log" | grep -E "refused|dropping"; }
log0=$(wc -l <"$work/kill.log")
boot boot3 "$work/boot3.sh" kill
wait_guest boot3
grep -q "VERIFY OK" "$work/boot3.console" || die "boot 3 did not verify"
grep -q "FIO OK" "$work/boot3.console" || die "boot 3: no fio verify on /dev/shm memory"
if refused "$log0"; then
	die "the back-end refused the client (memory-backend-file on /dev/shm)"
fi
echo "boot 3: reconnected client read back all $n writes; guest RAM on /dev/shm (memory-backend-file) accepted, fio verify OK"

# --- boot 4: guest RAM on hugetlbfs, if the host has huge pages -------------
hp_free=$(awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo)
hp_kib=$(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo)
hugedir=$(awk '$3 == "hugetlbfs" { print $2; exit }' /proc/mounts)
if [ -z "$hugedir" ]; then
	echo "SKIPPED: boot 4 (hugetlbfs guest RAM): no hugetlbfs mounted"
elif [ "$((${hp_free:-0} * ${hp_kib:-0}))" -lt $((512 * 1024)) ]; then
	echo "SKIPPED: boot 4 (hugetlbfs guest RAM): ${hp_free:-0} free huge pages of ${hp_kib:-?} KiB, 512 MiB needed"
elif [ ! -w "$hugedir" ]; then
	echo "SKIPPED: boot 4 (hugetlbfs guest RAM): $hugedir is not writable"
else
	queues=1
	mem="memory-backend-file,id=mem,size=512M,share=on,mem-path=$hugedir"
	log0=$(wc -l <"$work/kill.log")
	boot boot4 "$work/fio-verify.sh" kill
	wait_guest boot4
	grep -q "FIO OK" "$work/boot4.console" || die "boot 4: no fio verify on hugetlbfs memory"
	if refused "$log0"; then
		die "the back-end refused the client (memory-backend-file on hugetlbfs)"
	fi
	echo "boot 4: guest RAM on hugetlbfs ($hugedir) accepted, fio verify OK"
fi
kill -TERM "$pid_kill"
wait "$pid_kill" || { cat "$work/kill.log"; die "backend did not exit cleanly on SIGTERM"; }
[ ! -e "$work/kill.sock" ] || die "backend left its socket behind"
echo "back-end: SIGTERM exit clean"
echo "PASS"

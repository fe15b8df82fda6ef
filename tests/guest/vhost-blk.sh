#!/bin/sh
# Real Linux drivers against `iovm vhost-user-blk`: the default guest image
# (Debian's kernel, virtio_blk) under QEMU TCG, its disks served by iovm over
# vhost-user.
#   boot 1: a read-write and a read-only disk appear with the right sizes;
#           fio verify=crc32c (random writes, read back) at 4k and 64k, QD1
#           and QD16, and mixed random read/write; blkdiscard zeroes; the
#           read-only disk refuses writes; after poweroff the host file holds
#           exactly what the guest saw (sha256 of the whole disk).
#   boot 2: QEMU is SIGKILLed in the middle of writes; every write the guest
#           saw complete (O_DIRECT + fsync, then a marker on the console) is
#           in the file, and the back-end survives.
#   boot 3: a new QEMU connects to the same back-end and reads those writes
#           back.
# Usage: vhost-blk.sh IOVM_BINARY GUEST_DIR (GUEST_DIR from tools/mkguest.sh)
set -eu

iovm=$(realpath "${1:?usage: vhost-blk.sh IOVM GUEST_DIR}")
guest=$(realpath "${2:?usage: vhost-blk.sh IOVM GUEST_DIR}")

skip() { echo "SKIPPED: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

[ -r "$guest/bzImage" ] && [ -r "$guest/initramfs.cpio.gz" ] ||
	skip "no guest image in $guest (run tools/mkguest.sh $guest)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing"
command -v cpio >/dev/null || skip "cpio missing"

work=$(mktemp -d /tmp/iovm-vhost-blk.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

MiB=1048576

# start_backend NAME DISKSPEC [--once]: iovm vhost-user-blk on $work/NAME.sock
start_backend() {
	name=$1
	shift
	"$iovm" vhost-user-blk --socket "$work/$name.sock" "$@" \
		>"$work/$name.log" 2>&1 &
	eval "pid_$name=$!"
	pids="$pids $!"
	for _ in $(seq 50); do
		[ -S "$work/$name.sock" ] && return 0
		sleep 0.1
	done
	cat "$work/$name.log"
	die "backend $name did not create its socket"
}

# boot NAME SCRIPT BACKEND...: runs QEMU TCG with SCRIPT as the guest's
# command and one vhost-user-blk-pci per backend, in the background; the
# console goes to $work/NAME.console. Sets $qemu_pid.
boot() {
	name=$1 script=$2
	shift 2
	mkdir -p "$work/$name.d"
	cp "$script" "$work/$name.d/test.sh"
	(cd "$work/$name.d" && echo test.sh | cpio -o -H newc 2>/dev/null | gzip) \
		>"$work/$name.extra.gz"
	cat "$guest/initramfs.cpio.gz" "$work/$name.extra.gz" >"$work/$name.initrd"
	devs=""
	nb=0
	for b in "$@"; do
		devs="$devs -chardev socket,id=c$nb,path=$work/$b.sock"
		devs="$devs -device vhost-user-blk-pci,chardev=c$nb,num-queues=1"
		nb=$((nb + 1))
	done
	# shellcheck disable=SC2086
	timeout 600 qemu-system-x86_64 -accel tcg -m 512M -smp 1 \
		-object memory-backend-memfd,id=mem,size=512M,share=on \
		-numa node,memdev=mem $devs \
		-kernel "$guest/bzImage" -initrd "$work/$name.initrd" \
		-append "console=ttyS0 quiet iovm.net=0 iovm.script=/test.sh" \
		-display none -serial "file:$work/$name.console" -monitor none \
		-no-reboot -nic none -device isa-debug-exit,iobase=0xf4,iosize=1 \
		>"$work/$name.qemu" 2>&1 &
	qemu_pid=$!
	pids="$pids $!"
}

# wait_guest NAME: waits for QEMU to end; the guest script must pass.
wait_guest() {
	wait "$qemu_pid" || true
	if ! grep -q "iovm-init: exit status 0" "$work/$1.console"; then
		cat "$work/$1.console" "$work/$1.qemu"
		die "guest $1 failed"
	fi
}

sha() { sha256sum | cut -d' ' -f1; }
# file_sha FILE OFFSET_MIB LEN_MIB
file_sha() { dd if="$1" bs=$MiB skip="$2" count="$3" 2>/dev/null | sha; }

# --- boot 1: the functional checks -----------------------------------------
truncate -s 64M "$work/rw.img"
# Non-zero data where the guest will discard, so that the discard shows.
dd if=/dev/urandom of="$work/rw.img" bs=$MiB seek=40 count=4 conv=notrunc 2>/dev/null
head -c $((16 * MiB)) /dev/urandom >"$work/ro.img"
ro_sha=$(sha <"$work/ro.img")

cat >"$work/boot1.sh" <<EOF
set -e
fail() { echo "GUEST FAIL: \$*"; exit 1; }
[ "\$(cat /sys/block/vda/size)" = 131072 ] || fail "vda size \$(cat /sys/block/vda/size)"
[ "\$(cat /sys/block/vdb/size)" = 32768 ] || fail "vdb size"
[ "\$(cat /sys/block/vdb/ro)" = 1 ] || fail "vdb is not read-only"
[ "\$(cat /sys/block/vda/ro)" = 0 ] || fail "vda is read-only"
echo "DISKS OK"
job() {
	fio --name=\$1 --filename=/dev/vda --direct=1 --ioengine=libaio \\
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
blkdiscard -o $((40 * MiB)) -l $((4 * MiB)) /dev/vda || fail "blkdiscard"
nz=\$(dd if=/dev/vda bs=1M skip=40 count=4 iflag=direct 2>/dev/null | tr -d '\\000' | wc -c)
[ "\$nz" = 0 ] || fail "\$nz non-zero bytes after discard"
echo "DISCARD OK"
if dd if=/dev/zero of=/dev/vdb bs=4k count=1 oflag=direct 2>/dev/null; then
	fail "write to the read-only disk succeeded"
fi
[ "\$(sha256sum </dev/vdb | cut -d' ' -f1)" = $ro_sha ] || fail "vdb content"
echo "RO OK"
dd if=/dev/urandom of=/tmp/pat bs=1M count=4 2>/dev/null
dd if=/tmp/pat of=/dev/vda bs=1M seek=48 oflag=direct conv=fsync 2>/dev/null
sync
echo "DISK \$(sha256sum </dev/vda | cut -d' ' -f1)"
EOF
start_backend rw --disk "path=$work/rw.img" --once
start_backend ro --disk "path=$work/ro.img,ro" --once
boot boot1 "$work/boot1.sh" rw ro
wait_guest boot1
for b in rw ro; do
	eval "p=\$pid_$b"
	wait "$p" || { cat "$work/$b.log"; die "backend $b exited with an error"; }
done
guest_sha=$(sed -n 's/^DISK \([0-9a-f]*\).*/\1/p' "$work/boot1.console" | tr -d '\r')
[ -n "$guest_sha" ] || die "guest printed no disk checksum"
[ "$(sha <"$work/rw.img")" = "$guest_sha" ] ||
	die "host file differs from what the guest saw"
[ "$(sha <"$work/ro.img")" = "$ro_sha" ] || die "read-only disk changed"
echo "boot 1: disks, fio verify, discard, read-only and host content OK"

# --- boot 2: the client dies in the middle of writes ------------------------
truncate -s 64M "$work/kill.img"
cat >"$work/boot2.sh" <<'EOF'
# Background load keeps requests in flight when QEMU dies.
fio --name=bg --filename=/dev/vda --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=64k --iodepth=16 --offset=32M --size=32M --time_based --runtime=600 \
	>/dev/null 2>&1 &
i=0
while [ $i -lt 400 ]; do
	dd if=/dev/urandom of=/tmp/c bs=64k count=1 2>/dev/null
	dd if=/tmp/c of=/dev/vda bs=64k seek=$i oflag=direct conv=fsync 2>/dev/null || exit 1
	echo "DONE $i $(sha256sum </tmp/c | cut -d' ' -f1)"
	i=$((i + 1))
done
EOF
start_backend kill --disk "path=$work/kill.img"
boot boot2 "$work/boot2.sh" kill
for _ in $(seq 600); do
	c=$(grep -c '^DONE' "$work/boot2.console" 2>/dev/null) || c=0
	[ "$c" -ge 20 ] && break
	kill -0 "$qemu_pid" 2>/dev/null || break
	sleep 0.5
done
kill -9 "$qemu_pid"
wait "$qemu_pid" 2>/dev/null || true
done_lines=$(grep -a '^DONE [0-9]* [0-9a-f]\{64\}' "$work/boot2.console" | tr -d '\r')
[ "$(echo "$done_lines" | wc -l)" -ge 20 ] || {
	cat "$work/boot2.console"
	die "guest completed fewer than 20 writes before the kill"
}
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
[ ! -s "$work/lost" ] ||
	die "writes the guest saw complete are not in the file: $(tr '\n' ' ' <"$work/lost")"
n=$(echo "$done_lines" | wc -l)
echo "boot 2: QEMU killed after $n completed writes; all of them are in the file"

# --- boot 3: a new client on the same back-end reads them back --------------
{
	echo 'set -e'
	echo "$done_lines" | while read -r _ i s; do
		echo "[ \"\$(dd if=/dev/vda bs=64k skip=$i count=1 iflag=direct 2>/dev/null | sha256sum | cut -d' ' -f1)\" = $s ] || { echo 'GUEST FAIL: chunk $i'; exit 1; }"
	done
	echo 'echo "VERIFY OK"'
} >"$work/boot3.sh"
boot boot3 "$work/boot3.sh" kill
wait_guest boot3
grep -q "VERIFY OK" "$work/boot3.console" || die "boot 3 did not verify"
kill -TERM "$pid_kill"
wait "$pid_kill" || { cat "$work/kill.log"; die "backend did not exit cleanly on SIGTERM"; }
[ ! -e "$work/kill.sock" ] || die "backend left its socket behind"
echo "boot 3: reconnected client read back all $n writes; SIGTERM exit clean"
echo "PASS"

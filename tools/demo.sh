#!/bin/sh
# The README's first command: installs the build dependencies from Debian,
# builds iovm, the probe guest and the default Linux guest image, then runs
# iovm for real on this machine:
#   1. the probe on 2 vCPUs reports the CPUs and memory it sees and its
#      port-I/O round trip (CPL 0 and CPL 3);
#   2. the probe drives a virtio-blk disk backed by a real file (every request
#      type, random 4k-64k writes and verified reads), then the host checks
#      the file;
#   3. the probe's 9P client reads and writes a shared host folder.
# On a host without a usable /dev/kvm (`iovm run` needs KVM), it shows the
# same devices as the back-ends other VMMs use instead: Debian's Linux under
# QEMU TCG drives `iovm vhost-user-blk` on a real file with fio (verified
# random writes) and mounts a host folder from `iovm 9p-serve` over TCP.
# Run as root on Debian 12.
set -eu
cd "$(dirname "$0")/.."

./tools/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build
./tools/mkguest.sh build/guest

iovm=build/iovm
probe=build/guest/probe/probe.elf
work=$(mktemp -d /tmp/iovm-demo.XXXXXX)
pids=
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# Without KVM: Linux under QEMU TCG (slow: a minute or two, not seconds)
# against iovm's vhost-user-blk and 9P-over-TCP servers.
demo_without_kvm() {
	echo "demo: no usable /dev/kvm on this host, so 'iovm run' cannot start a VM here;"
	echo "      showing iovm's devices as back-ends to Linux under QEMU TCG instead"
	command -v qemu-system-x86_64 >/dev/null || {
		echo "demo: qemu-system-x86_64 is missing (tools/install-deps.sh installs it)" >&2
		exit 1
	}
	truncate -s 64M "$work/disk.img"
	mkdir -p "$work/share/sub"
	for i in $(seq 0 99); do : >"$work/share/sub/f$i"; done
	echo "hello from the host" >"$work/share/hello.txt"

	printf '\n== 1. iovm vhost-user-blk on a real disk file (%s) ==\n' "$work/disk.img"
	echo "\$ $iovm vhost-user-blk --socket $work/blk.sock --disk path=$work/disk.img &"
	"$iovm" vhost-user-blk --socket "$work/blk.sock" --disk path="$work/disk.img" \
		2>"$work/blk.log" &
	pids="$pids $!"
	printf '\n== 2. iovm 9p-serve on a host folder (%s) ==\n' "$work/share"
	echo "\$ $iovm 9p-serve --share path=$work/share --listen tcp:127.0.0.1:0 &"
	"$iovm" 9p-serve --share path="$work/share" --listen tcp:127.0.0.1:0 \
		>"$work/9p.out" 2>"$work/9p.log" &
	pids="$pids $!"
	port=
	for _ in $(seq 50); do
		port=$(sed -n 's/^listening on tcp:127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/9p.out" 2>/dev/null || true)
		[ -n "$port" ] && [ -S "$work/blk.sock" ] && break
		sleep 0.1
	done
	if [ -z "$port" ] || ! [ -S "$work/blk.sock" ]; then
		cat "$work/blk.log" "$work/9p.log" >&2
		echo "demo: a back-end did not start" >&2
		exit 1
	fi
	# fio's terse output: field 47 is the KiB written, 49 the write IOPS.
	cat >"$work/guest.sh" <<GUEST
set -e
echo "guest: /dev/vda has \$(cat /sys/block/vda/size) sectors, served by iovm vhost-user-blk"
fio --name=verify --filename=/dev/vda --direct=1 --ioengine=libaio --rw=randwrite \
	--bs=4k --iodepth=16 --size=32M --verify=crc32c --do_verify=1 --output-format=terse \
	--terse-version=3 >/tmp/fio.out
awk -F';' '{ printf "guest: fio wrote %s KiB at %s IOPS, read back and verified (crc32c)\n", \$47, \$49 }' /tmp/fio.out
mkdir -p /mnt/share
mount -t 9p -o trans=tcp,version=9p2000.L,port=$port 10.0.2.2 /mnt/share
echo "guest: the host's hello.txt says: \$(cat /mnt/share/hello.txt)"
echo "guest: /mnt/share/sub has \$(ls /mnt/share/sub | wc -l) entries"
echo "written by the guest" >/mnt/share/from-guest
umount /mnt/share
GUEST
	printf '\n== 3. Linux under QEMU TCG drives both ==\n'
	set -- -object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
		-chardev socket,id=c0,path="$work/blk.sock" -device vhost-user-blk-pci,chardev=c0
	echo "\$ tests/guest/qemu-tcg.sh -g build/guest -n -m 512M -s $work/guest.sh -- $*"
	if ! tests/guest/qemu-tcg.sh -g build/guest -n -t 600 -m 512M -s "$work/guest.sh" -- "$@"; then
		cat "$work/blk.log" "$work/9p.log" >&2
		echo "demo: the guest's script failed" >&2
		exit 1
	fi
	echo "host: the guest's writes allocated $(du -h "$work/disk.img" | cut -f1) of the disk file;" \
		"$work/share/from-guest says '$(cat "$work/share/from-guest")'"
	printf '\nDemo done (without KVM). The default Linux guest is in build/guest (bzImage, initramfs.cpio.gz).\n'
	exit 0
}

if ! [ -c /dev/kvm ] || ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
	demo_without_kvm
fi

# The probe ends with "probe: PASS" and writes 0 to the exit port, which
# makes the VMM exit with status 1 (QEMU's isa-debug-exit convention).
probe_run() {
	status=0
	"$@" || status=$?
	if [ "$status" != 1 ]; then
		echo "demo: the probe did not pass (iovm exit status $status)" >&2
		exit 1
	fi
}

printf '\n== 1. the probe guest: CPUs, memory, port-I/O round trip ==\n'
echo "\$ $iovm run --kernel $probe --cpus 2 --memory 64M --append test=basic"
probe_run "$iovm" run --kernel "$probe" --cpus 2 --memory 64M --append test=basic

printf '\n== 2. virtio-blk on a real disk file (%s) ==\n' "$work/disk.img"
truncate -s 64M "$work/disk.img"
echo "\$ $iovm run --kernel $probe --memory 128M --disk path=$work/disk.img --append 'test=blk mode=msix'"
probe_run "$iovm" run --kernel "$probe" --memory 128M \
	--disk path="$work/disk.img" --append "test=blk mode=msix"
echo "host: $(du -h --apparent-size "$work/disk.img" | cut -f1) disk file, $(du -h "$work/disk.img" | cut -f1) allocated by the guest's writes"

printf '\n== 3. a shared folder over virtio-9p (%s) ==\n' "$work/share"
mkdir -p "$work/share/sub"
for i in $(seq 0 99); do : >"$work/share/sub/f$i"; done
echo "hello from the host" >"$work/share/hello.txt"
echo "\$ $iovm run --kernel $probe --memory 256M --share path=$work/share,tag=probe9p --append 'test=9p msize=512000'"
probe_run "$iovm" run --kernel "$probe" --memory 256M \
	--share "path=$work/share,tag=probe9p" --append "test=9p msize=512000"
echo "host: the guest wrote $(stat -c '%s bytes, mode %a' "$work/share/from-probe") to $work/share/from-probe"

printf '\nDemo done. The default Linux guest is in build/guest (bzImage, initramfs.cpio.gz).\n'

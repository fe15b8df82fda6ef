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
# Needs /dev/kvm. Run as root on Debian 12.
set -eu
cd "$(dirname "$0")/.."

./tools/install-deps.sh
[ -d build ] || meson setup build >/dev/null
ninja -C build
./tools/mkguest.sh build/guest

if ! [ -c /dev/kvm ] || ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
	echo "demo: /dev/kvm cannot be opened: iovm needs KVM to run a VM" >&2
	exit 1
fi

iovm=build/iovm
probe=build/guest/probe/probe.elf
work=$(mktemp -d /tmp/iovm-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT

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

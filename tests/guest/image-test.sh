#!/bin/sh
# Test of the default guest image under QEMU TCG (suite 'guest'): it boots,
# /init loads the modules and runs the command it is given, the tools the
# real-driver tests use are there and work on a virtio disk, and the
# command's exit status (zero and non-zero) comes back through the harness.
# usage: image-test.sh GUEST_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
guest=${1:?usage: image-test.sh GUEST_DIR}
if [ ! -f "$guest/vmlinux" ] || [ ! -f "$guest/initramfs.cpio.gz" ]; then
	echo "SKIPPED: no guest image in $guest (build it: tools/mkguest.sh $guest)"
	exit 77
fi
if ! command -v qemu-system-x86_64 >/dev/null; then
	echo "SKIPPED: qemu-system-x86_64 is not installed"
	exit 77
fi
tcg="$here/qemu-tcg.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/image-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # name, expected status, actual status
	if [ "$2" = "$3" ]; then
		echo "ok: $1"
	else
		echo "FAIL: $1: status $3, expected $2"
		fail=1
	fi
}

# 1. Modules, tools and fio on a virtio-blk disk, from a multi-line script
# with a data file copied in.
head -c 1048576 /dev/urandom >"$tmp/data"
sum=$(sha256sum "$tmp/data" | cut -d' ' -f1)
truncate -s 64M "$tmp/disk.img"
cat >"$tmp/script.sh" <<EOS
set -e
for m in virtio_pci virtio_blk virtio_scsi sd_mod sg sym53c8xx 9p 9pnet_virtio \\
	9pnet_fd virtio_net e1000; do
	lsmod | grep -q "^\$m " || { echo "module \$m not loaded"; exit 10; }
done
fio --version | grep -q '^fio-' || exit 11
sg_inq --version 2>&1 | grep -q . || exit 12
sdparm --version 2>&1 | grep -q . || exit 13
blkdiscard --version | grep -q util-linux || exit 14
for t in flock lsblk mountpoint; do
	\$t --version | grep -q util-linux || { echo "no util-linux \$t"; exit 14; }
done
getfattr --version | grep -q getfattr || exit 14
xfs_io -V | grep -q xfs_io || exit 14
[ "\$(sha256sum /iovm/data | cut -d' ' -f1)" = "$sum" ] || exit 15
[ -b /dev/vda ] || { cat /proc/partitions; exit 16; }
fio --name=verify --filename=/dev/vda --direct=1 --ioengine=libaio \\
	--rw=randwrite --bs=4k --size=4M --iodepth=8 --verify=crc32c \\
	--output-format=terse >/tmp/fio.out || exit 17
blkdiscard /dev/vda || exit 18
echo "guest checks passed"
EOS
"$tcg" -g "$guest" -t 240 -s "$tmp/script.sh" -f "$tmp/data" \
	-- -drive "file=$tmp/disk.img,if=virtio,format=raw"
check "modules, tools and fio in the guest" 0 $?

# 2. A non-zero status comes back as is; a command too long for the kernel
# command line still gets in (as a file); user networking gets a DHCP lease.
pad=$(head -c 1500 /dev/zero | tr '\0' x)
"$tcg" -g "$guest" -t 240 -n -c "pad=$pad
[ \${#pad} = 1500 ] || exit 1
ip -4 addr show eth0 | grep -q 'inet 10\.0\.2\.15/' || exit 2
ip -4 route | grep -q '^default via 10\.0\.2\.2 ' || exit 3
exit 37"
check "non-zero exit status, long command, DHCP on eth0" 37 $?

# 3. QEMU failing to start is not mistaken for a guest status.
"$tcg" -g "$guest" -t 60 -c 'exit 0' -- -no-such-option 2>/dev/null
check "QEMU error reported as 125" 125 $?

exit $fail

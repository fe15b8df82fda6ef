#!/bin/sh
# Installs, from Debian's archive, everything iovm needs to build, to build
# its guest image and its User-Mode Linux kernel (linux-source-6.1 and the
# kernel's build tools), and to run its whole test suite. Idempotent; run as root.
set -eu

PKGS="build-essential meson ninja-build pkg-config liburing-dev libcmocka-dev liblzma-dev zlib1g-dev libzstd-dev
clang llvm libclang-rt-14-dev
qemu-system-x86 qemu-utils qemu-block-extra
cpio gzip xz-utils zstd busybox-static fio sg3-utils util-linux
python3 binutils file strace libjson-c-dev
linux-source-6.1 flex bison bc kmod patch qemu-system-common procps
libiscsi-bin
ceph-mon ceph-osd ceph-common librbd-dev nbdkit libnbd-dev libnbd-bin gnutls-bin"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "install-deps: installing:$missing"
	if [ "$(id -u)" != 0 ]; then
		echo "install-deps: must run as root to install packages" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing
fi

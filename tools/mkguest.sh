#!/bin/sh
# Builds iovm's default Linux guest image into OUTDIR (default build/guest):
#   bzImage            Debian 12's stock kernel (linux-image-6.1.*-amd64)
#   vmlinux            the same kernel decompressed (an ELF with a PVH entry):
#                      QEMU boots it directly, which under TCG saves the ~4 s
#                      the bzImage spends decompressing itself
#   initramfs.cpio.gz  busybox-static with its applets; dash as /bin/sh (busybox
#                      ash would run its own applets in place of same-named
#                      programs such as util-linux's blkdiscard); the kernel
#                      modules the device tests need, with their
#                      dependencies; fio and the shared libraries it needs;
#                      sg3-utils, sdparm; util-linux's blkdiscard, flock,
#                      lsblk, mountpoint; setfattr/getfattr; xfs_io (file
#                      syscalls one by one, for the 9P tests); our /init and
#                      static helpers (tools/guest/)
#   initramfs.cpio     the same, uncompressed: under TCG the kernel unpacks it
#                      seconds faster than the .gz
#   packages.txt       the Debian packages (name=version) it was built from
#   kernel-version     the kernel release (uname -r in the guest)
# Packages come from Debian's archive through `apt-get download` (cached in
# $IOVM_CACHE, default ~/.cache/iovm/debs), never from the host's installed
# files. The image is rebuilt only when an input changes: the candidate
# versions of the packages, or this script and tools/guest/*.
#
# Environment:
#   IOVM_CACHE       download cache directory (shared by all worktrees)
#   IOVM_KERNEL_PKG  kernel package to use instead of the one that Debian's
#                    linux-image-amd64 depends on
#   IOVM_FORCE=1     rebuild even when nothing changed
set -eu

usage() {
	echo "usage: $0 [OUTDIR]   (build the default guest image, default build/guest)"
}

case "${1:-}" in
-h|--help) usage; exit 0 ;;
-*) usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { usage >&2; exit 2; }

die() { echo "mkguest: $*" >&2; exit 1; }
note() { echo "mkguest: $*"; }

here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "${1:-build/guest}"
out=$(cd "${1:-build/guest}" && pwd)
cache=${IOVM_CACHE:-${HOME:-/root}/.cache/iovm/debs}
mkdir -p "$cache"

for t in apt-get apt-cache dpkg-deb readelf cpio gzip sha256sum gcc; do
	command -v "$t" >/dev/null ||
		die "$t is missing (run tools/install-deps.sh)"
done

# Kernel modules the device tests need; their dependencies are added from
# each module's own .modinfo. Names as in lsmod.
MODULES="virtio_pci virtio_blk virtio_scsi virtio_net sd_mod sg sym53c8xx
scsi_transport_spi 9p 9pnet 9pnet_virtio 9pnet_fd e1000"

# Programs from Debian packages in the image (besides busybox's applets).
PROGRAMS="fio sg_inq sg_vpd sg_readcap sg_wr_mode sg_modes sg_turs sg_requests
sg_luns sg_sync sg_unmap sg_write_same sg_raw sg_get_lba_status sg_logs sg_dd
sg_format sg_start sg_verify sg_rtpg sdparm blkdiscard flock lsblk mountpoint
setfattr getfattr xfs_io dash"

# Packages that provide PROGRAMS; the shared libraries they link come from the
# closure of their lib* dependencies.
ROOT_PKGS="busybox-static dash fio sg3-utils sdparm util-linux attr xfsprogs"

# --- cheap up-to-date check: our inputs and the state of apt's lists ---------
inputs=$(cat "$here/mkguest.sh" "$here"/guest/* | sha256sum | cut -d' ' -f1)
lists=$(ls -l --time-style=+%s /var/lib/apt/lists/ 2>/dev/null | sha256sum |
	cut -d' ' -f1)
quick_key="$inputs $lists ${IOVM_KERNEL_PKG:-}"
outputs_ok() {
	[ -s "$out/bzImage" ] && [ -s "$out/vmlinux" ] &&
		[ -s "$out/initramfs.cpio.gz" ] && [ -s "$out/initramfs.cpio" ] &&
		[ -s "$out/packages.txt" ]
}
if [ "${IOVM_FORCE:-0}" != 1 ] && outputs_ok &&
	[ "$(cat "$out/.stamp-quick" 2>/dev/null)" = "$quick_key" ]; then
	note "$out is up to date"
	exit 0
fi

# --- resolve package versions -----------------------------------------------
kernel_pkg() {
	apt-cache depends linux-image-amd64 2>/dev/null |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }'
}
kpkg=${IOVM_KERNEL_PKG:-$(kernel_pkg)}
if [ -z "$kpkg" ] && [ "$(id -u)" = 0 ]; then
	# A fresh machine may have no package lists yet.
	note "no package lists: running apt-get update"
	apt-get update -qq || die "apt-get update failed"
	kpkg=$(kernel_pkg)
fi
[ -n "$kpkg" ] || die "cannot resolve linux-image-amd64 (run apt-get update)"

# Breadth-first closure over library packages (lib*, zlib1g): what a program's
# DT_NEEDED entries can point to. Tools, interpreters and config packages that
# the roots also depend on are not followed.
lib_closure() {
	seen=" $* "
	frontier="$*"
	while [ -n "$frontier" ]; do
		# shellcheck disable=SC2086
		next=$(apt-cache depends --no-recommends --no-suggests \
			--no-conflicts --no-breaks --no-replaces --no-enhances \
			$frontier 2>/dev/null |
			awk '($1 ~ /^\|?(Pre)?Depends:$/) && $2 !~ /^</ {
				sub(/:any$/, "", $2); print $2 }' | sort -u)
		frontier=
		for p in $next; do
			case "$p" in lib*|zlib1g) ;; *) continue ;; esac
			case "$seen" in *" $p "*) continue ;; esac
			seen="$seen$p "
			frontier="$frontier $p"
		done
	done
	echo "$seen"
}

# shellcheck disable=SC2086
pkgs=$(lib_closure $ROOT_PKGS)
# shellcheck disable=SC2086
pkglist=$(apt-cache show --no-all-versions $kpkg $pkgs 2>/dev/null |
	awk '/^Package:/ { p = $2 } /^Version:/ { print p "=" $2 }' | sort -u)
for p in $kpkg $pkgs; do
	printf '%s\n' "$pkglist" | grep -q "^$p=" ||
		die "no installable version of package $p (run apt-get update)"
done
full_key=$(printf '%s\n%s\n' "$inputs" "$pkglist" | sha256sum | cut -d' ' -f1)
if [ "${IOVM_FORCE:-0}" != 1 ] && outputs_ok &&
	[ "$(cat "$out/.stamp" 2>/dev/null)" = "$full_key" ]; then
	printf '%s\n' "$quick_key" >"$out/.stamp-quick"
	note "$out is up to date"
	exit 0
fi

# --- download what the cache lacks ------------------------------------------
deb_of() { # name=version -> cached .deb path (apt-get download's file name)
	n=${1%%=*}
	v=$(printf '%s' "${1#*=}" | sed 's/:/%3a/')
	for f in "$cache/${n}_${v}_"*.deb; do
		[ -f "$f" ] && { echo "$f"; return 0; }
	done
	return 1
}
missing=
for pv in $pkglist; do
	deb_of "$pv" >/dev/null || missing="$missing $pv"
done
if [ -n "$missing" ]; then
	note "downloading:$missing"
	dl=$(mktemp -d "$cache/.dl.XXXXXX")
	# shellcheck disable=SC2086
	(cd "$dl" && apt-get -q -o APT::Sandbox::User=root download $missing) ||
		{ rm -rf "$dl"; die "apt-get download failed"; }
	mv "$dl"/*.deb "$cache/"
	rmdir "$dl"
fi

# --- unpack -----------------------------------------------------------------
work="$out/.work"
rm -rf "$work"
mkdir -p "$work/pkgs" "$work/kernel" "$work/root"
trap 'rm -rf "$work"' EXIT
for pv in $pkglist; do
	f=$(deb_of "$pv") || die "download of $pv is missing from $cache"
	case "$pv" in
	"$kpkg="*) dpkg-deb --fsys-tarfile "$f" |
		tar -x -C "$work/kernel" ./boot ./lib/modules ;;
	*) dpkg-deb -x "$f" "$work/pkgs" ;;
	esac
done
pk="$work/pkgs"
root="$work/root"

set -- "$work"/kernel/boot/vmlinuz-*
[ $# = 1 ] && [ -f "$1" ] || die "$kpkg holds no single boot/vmlinuz-*"
kver=${1##*/vmlinuz-}
kdir="$work/kernel/lib/modules/$kver"

# --- image skeleton, busybox ------------------------------------------------
for d in bin sbin usr/bin usr/sbin lib/x86_64-linux-gnu lib64 etc/iovm proc \
	sys dev tmp run root mnt "lib/modules/$kver"; do
	mkdir -p "$root/$d"
done
cp "$pk/bin/busybox" "$root/bin/busybox"
for a in $("$root/bin/busybox" --list-full); do
	[ -e "$root/$a" ] || ln -s /bin/busybox "$root/$a"
done
cat >"$root/etc/passwd" <<EOF
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<EOF
root:x:0:
tty:x:5:
nogroup:x:65534:
EOF
echo iovm-guest >"$root/etc/hostname"

# --- programs and the shared libraries they need ----------------------------
# Path inside the package tree that a file (maybe a chain of symlinks, relative
# or absolute) finally names.
tree_resolve() {
	f=$1
	n=0
	while [ -L "$f" ]; do
		l=$(readlink "$f")
		case "$l" in
		/*) f="$pk$l" ;;
		*) f="$(dirname "$f")/$l" ;;
		esac
		n=$((n + 1))
		[ $n -lt 20 ] || return 1
	done
	[ -f "$f" ] && echo "$f"
}

find "$pk" \( -type f -o -type l \) -name '*.so*' >"$work/libindex"
needed_of() {
	readelf -d "$1" 2>/dev/null |
		sed -n 's/.*(NEEDED).*Shared library: \[\(.*\)\]/\1/p'
}
interp=
add_elf_deps() { # ELF file in the image -> copy its libraries, recursively
	local i so src dst cand
	i=$(readelf -l "$1" 2>/dev/null |
		sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
	if [ -n "$i" ] && [ ! -e "$root$i" ]; then
		src=$(tree_resolve "$pk$i") || die "no program interpreter $i"
		mkdir -p "$root$(dirname "$i")"
		cp "$src" "$root$i"
		interp=$i
	fi
	for so in $(needed_of "$1"); do
		dst="$root/lib/x86_64-linux-gnu/$so"
		[ -e "$dst" ] && continue
		case "$so" in ld-linux-x86-64.so.2)
			[ -n "$interp" ] && { ln -s "$interp" "$dst"; continue; } ;;
		esac
		src=
		for cand in $(grep "/$so\$" "$work/libindex"); do
			src=$(tree_resolve "$cand") && break
		done
		[ -n "$src" ] || die "no package provides $so (needed by ${1#"$root"})"
		cp "$src" "$dst"
		add_elf_deps "$dst"
	done
}
for prog in $PROGRAMS; do
	src=
	for d in usr/bin usr/sbin bin sbin; do
		[ -f "$pk/$d/$prog" ] && { src="$pk/$d/$prog"; dir=$d; break; }
	done
	[ -n "$src" ] || die "no package provides program $prog"
	# The package's program replaces a busybox applet of the same name.
	for d in usr/bin usr/sbin bin sbin; do
		rm -f "$root/$d/$prog"
	done
	cp "$src" "$root/$dir/$prog"
	add_elf_deps "$root/$dir/$prog"
done

ln -sf dash "$root/bin/sh"

# --- kernel modules ---------------------------------------------------------
find "$kdir/kernel" -name '*.ko*' | sed "s|^$kdir/||" |
	awk '{ n = $0; sub(/.*\//, "", n); sub(/\.ko.*$/, "", n);
	       gsub(/-/, "_", n); print n, $0 }' >"$work/modindex"
builtin() {
	n=$(printf '%s' "$1" | tr - _)
	sed 's|.*/||; s|\.ko$||; s|-|_|g' "$kdir/modules.builtin" |
		grep -qx "$n"
}
mod_path() { awk -v n="$(printf '%s' "$1" | tr - _)" '$1 == n { print $2 }' \
	"$work/modindex"; }
# Copies a module (uncompressed) into the image and echoes its image path.
mod_install() {
	rel=$1
	dst=${rel%.ko*}.ko
	mkdir -p "$root/lib/modules/$kver/$(dirname "$dst")"
	case "$rel" in
	*.ko) cp "$kdir/$rel" "$root/lib/modules/$kver/$dst" ;;
	*.ko.xz) xz -dc "$kdir/$rel" >"$root/lib/modules/$kver/$dst" ;;
	*.ko.zst) zstd -qdc "$kdir/$rel" >"$root/lib/modules/$kver/$dst" ;;
	*) die "unknown module compression: $rel" ;;
	esac
	echo "$dst"
}
mod_deps_of() { # image path of a module -> names of its direct dependencies
	readelf -p .modinfo "$root/lib/modules/$kver/$1" |
		sed -n 's/.*depends=//p' | tr , ' ' | tr - _
}
order="$work/modorder" # load order: dependencies first
: >"$order"
mod_visit() { # module name: install it after its dependencies
	local m rel dst d
	m=$(printf '%s' "$1" | tr - _)
	grep -q " $m\$" "$order" && return 0
	rel=$(mod_path "$m")
	if [ -z "$rel" ]; then
		builtin "$m" && return 0
		die "kernel $kver has no module $m"
	fi
	dst=$(mod_install "$rel")
	for d in $(mod_deps_of "$dst"); do
		mod_visit "$d"
	done
	echo "$dst $m" >>"$order"
}
for m in $MODULES; do
	mod_visit "$m"
done
cut -d' ' -f1 "$order" >"$root/etc/iovm/modules"
# modules.dep for busybox modprobe: each module with all its dependencies,
# those loaded last first, as depmod writes them.
trans_collect() { # module name -> adds its dependencies' names to $all
	local d p
	p=$(awk -v n="$1" '$2 == n { print $1 }' "$order")
	[ -n "$p" ] || return 0 # built in
	for d in $(mod_deps_of "$p"); do
		case "$all" in *" $d "*) continue ;; esac
		all="$all$d "
		trans_collect "$d"
	done
}
while read -r path name; do
	all=" "
	trans_collect "$name"
	# Reverse load order among the dependencies.
	deps=$(awk -v all="$all" 'index(all, " " $2 " ") { print $1 }' "$order" |
		tac | tr '\n' ' ')
	echo "$path: $deps" | sed 's/ *$//'
done <"$order" >"$root/lib/modules/$kver/modules.dep"
cp "$kdir/modules.builtin" "$kdir/modules.order" "$root/lib/modules/$kver/"

# --- our files --------------------------------------------------------------
cp "$here/guest/init" "$root/init"
chmod 755 "$root/init"
cp "$here/guest/udhcpc.script" "$root/etc/iovm/udhcpc.script"
chmod 755 "$root/etc/iovm/udhcpc.script"
rm -f "$root/bin/iovm-exit"
gcc -static -Os -s -Wall -Wextra -Werror -o "$root/bin/iovm-exit" \
	"$here/guest/iovm-exit.c"
echo "$kver" >"$root/etc/iovm/kernel-version"
printf '%s\n' "$pkglist" >"$root/etc/iovm/packages"

# The kernel ELF inside a bzImage: its payload, found through the boot
# protocol header (setup_sects at 0x1f1, payload_offset/length at 0x248), is
# the compressed ELF followed by its 4-byte uncompressed size.
extract_vmlinux() {
	local sects off len start magic
	sects=$(od -An -tu1 -j$((0x1f1)) -N1 "$1" | tr -d ' ')
	[ "$sects" != 0 ] || sects=4
	off=$(od -An -tu4 -j$((0x248)) -N4 "$1" | tr -d ' ')
	len=$(od -An -tu4 -j$((0x24c)) -N4 "$1" | tr -d ' ')
	start=$(((sects + 1) * 512 + off))
	magic=$(od -An -tx1 -j$start -N4 "$1" | tr -d ' ')
	tail -c +$((start + 1)) "$1" | head -c $((len - 4)) >"$work/payload"
	case "$magic" in
	fd377a58) xz -dcq "$work/payload" ;;
	1f8b*) gzip -dcq "$work/payload" ;;
	28b52ffd) zstd -qdc "$work/payload" ;;
	*) die "bzImage payload compression not handled (magic $magic)" ;;
	esac
}

# --- archives ---------------------------------------------------------------
(cd "$root" && find . | LC_ALL=C sort |
	cpio -o -H newc -R 0:0 --quiet) >"$out/initramfs.cpio.tmp"
gzip -n -6 <"$out/initramfs.cpio.tmp" >"$out/initramfs.cpio.gz.tmp"
mv "$out/initramfs.cpio.tmp" "$out/initramfs.cpio"
mv "$out/initramfs.cpio.gz.tmp" "$out/initramfs.cpio.gz"
cp "$work/kernel/boot/vmlinuz-$kver" "$out/bzImage"
extract_vmlinux "$out/bzImage" >"$out/vmlinux.tmp"
readelf -n "$out/vmlinux.tmp" | grep -q 'note type: (0x00000012)' ||
	die "$kpkg's kernel has no PVH entry note (CONFIG_PVH)"
mv "$out/vmlinux.tmp" "$out/vmlinux"
echo "$kver" >"$out/kernel-version"
printf '%s\n' "$pkglist" >"$out/packages.txt"
printf '%s\n' "$full_key" >"$out/.stamp"
printf '%s\n' "$quick_key" >"$out/.stamp-quick"
note "built $out (kernel $kver, initramfs $(du -h "$out/initramfs.cpio.gz" |
	cut -f1))"

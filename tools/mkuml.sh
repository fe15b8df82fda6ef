#!/bin/sh
# Builds the User-Mode Linux kernel (ARCH=um, x86_64) of the `uml` test suite
# into OUTDIR (default build/uml):
#   linux          the UML kernel: a host program (./linux mem=... root=...)
#   modules/       lib/modules/RELEASE/ with the drivers the tests reload
#                  (modprobe -d OUTDIR/modules NAME inside UML)
#   config         the kernel's final .config
#   kernel-version the kernel release (uname -r inside UML)
# from Debian's /usr/src/linux-source-6.1.tar.xz (package linux-source-6.1)
# with tools/uml/patches/*.patch applied in order and tools/uml/config merged
# onto `make ARCH=um defconfig`. The build (~11 min at -j2) is cached in
# ${IOVM_CACHE_DIR:-~/.cache/iovm}/uml/KEY, KEY being the sha256 of the source
# package's version, the patches, the config fragment and this script;
# OUTDIR gets a copy of it.
#
# Environment:
#   IOVM_CACHE_DIR  cache directory (shared by all worktrees)
#   IOVM_UML_SRC    source tarball (default /usr/src/linux-source-6.1.tar.xz)
#   IOVM_UML_JOBS   make -j (default 2); the build always runs under nice 19
#   IOVM_FORCE=1    rebuild even when the cache has this KEY
#   IOVM_UML_KEEP=1 keep the build tree (its path is printed), to try a patch
set -eu

usage() {
	echo "usage: $0 [OUTDIR]   (build the UML test kernel, default build/uml)"
}

case "${1:-}" in
-h|--help) usage; exit 0 ;;
-*) usage >&2; exit 2 ;;
esac
[ $# -le 1 ] || { usage >&2; exit 2; }

die() { echo "mkuml: $*" >&2; exit 1; }
note() { echo "mkuml: $*"; }

here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "${1:-build/uml}"
out=$(cd "${1:-build/uml}" && pwd)
src=${IOVM_UML_SRC:-/usr/src/linux-source-6.1.tar.xz}
srcpkg=linux-source-6.1
cache=${IOVM_CACHE_DIR:-${HOME:-/root}/.cache/iovm}/uml
jobs=${IOVM_UML_JOBS:-2}

for t in make gcc flex bison bc patch xz tar depmod flock sha256sum; do
	command -v "$t" >/dev/null ||
		die "$t is missing (run tools/install-deps.sh)"
done
[ -r "$src" ] || die "no $src (install package $srcpkg: tools/install-deps.sh)"

# --- the key: everything the build depends on ---------------------------------
if [ -n "${IOVM_UML_SRC:-}" ]; then
	srcver="file $(sha256sum "$src" | cut -d' ' -f1)"
else
	srcver=$(dpkg-query -W -f='${Package}=${Version}' "$srcpkg" 2>/dev/null) ||
		die "package $srcpkg is not installed (tools/install-deps.sh)"
fi
patches=$(ls "$here"/uml/patches/*.patch 2>/dev/null | LC_ALL=C sort)
[ -r "$here/uml/config" ] || die "no config fragment $here/uml/config"
# shellcheck disable=SC2086
key=$({ echo "$srcver"; cat "$here/mkuml.sh" "$here/uml/config" $patches; } |
	sha256sum | cut -d' ' -f1)
dest="$cache/$key"

installed_ok() { # DIR: holds a complete result
	[ -x "$1/linux" ] && [ -d "$1/modules/lib/modules" ] &&
		[ -s "$1/config" ] && [ -s "$1/kernel-version" ]
}

if [ "${IOVM_FORCE:-0}" != 1 ] && installed_ok "$out" &&
	[ "$(cat "$out/.key" 2>/dev/null)" = "$key" ]; then
	note "$out is up to date ($(cat "$out/kernel-version"))"
	exit 0
fi

mkdir -p "$cache"
# One build per cache at a time (several worktrees or test runs may ask).
exec 9>"$cache/.lock"
flock 9

if [ "${IOVM_FORCE:-0}" = 1 ] || ! installed_ok "$dest"; then
	start=$(date +%s)
	work=$(mktemp -d "$cache/.build.XXXXXX")
	if [ "${IOVM_UML_KEEP:-0}" = 1 ]; then
		trap 'note "build tree kept: $work"' EXIT
	else
		trap 'rm -rf "$work"' EXIT
	fi
	note "building UML from $srcver in $work (nice -n 19 make -j$jobs)"
	tar -xf "$src" -C "$work"
	set -- "$work"/*/Makefile
	[ $# = 1 ] && [ -f "$1" ] || die "$src holds no single kernel tree"
	ksrc=$(dirname "$1")
	for p in $patches; do
		note "patch $(basename "$p")"
		patch -d "$ksrc" -p1 -s --no-backup-if-mismatch <"$p" ||
			die "patch $(basename "$p") does not apply"
	done

	mk() { nice -n 19 make --no-print-directory -C "$ksrc" ARCH=um SUBARCH=x86_64 "$@"; }
	mk -s defconfig >/dev/null
	(cd "$ksrc" && nice -n 19 ./scripts/kconfig/merge_config.sh -m \
		.config "$here/uml/config") >"$work/merge.log" 2>&1 ||
		{ cat "$work/merge.log"; die "merge_config.sh failed"; }
	mk -s olddefconfig
	# Kconfig silently drops an option whose dependencies are missing:
	# every line of the fragment must be in the final .config as written.
	bad=$(grep -E '^(CONFIG_[A-Za-z0-9_]+=|# CONFIG_[A-Za-z0-9_]+ is not set)' \
		"$here/uml/config" | while IFS= read -r line; do
		grep -qxF "$line" "$ksrc/.config" || echo "$line"
	done)
	if [ -n "$bad" ]; then
		printf 'mkuml: not in the final .config:\n%s\n' "$bad" >&2
		die "the config fragment did not apply (see above)"
	fi

	mk -j"$jobs" linux modules >"$work/build.log" 2>&1 ||
		{ tail -n 60 "$work/build.log"; die "kernel build failed"; }
	mk -s INSTALL_MOD_PATH="$work/result/modules" INSTALL_MOD_STRIP=1 \
		modules_install >"$work/install.log" 2>&1 ||
		{ tail -n 30 "$work/install.log"; die "modules_install failed"; }
	cp "$ksrc/linux" "$work/result/linux"
	cp "$ksrc/.config" "$work/result/config"
	mk -s kernelrelease >"$work/result/kernel-version"
	printf '%s\n' "$srcver" >"$work/result/source"
	rm -rf "$dest"
	if [ "${IOVM_UML_KEEP:-0}" = 1 ]; then
		cp -a "$work/result" "$dest"
	else
		mv "$work/result" "$dest"
	fi
	note "built in $(($(date +%s) - start)) s: $dest"
fi

# --- OUTDIR: a copy (a later rebuild of the cache must not change it) ---------
rm -rf "$out/linux" "$out/modules" "$out/.key"
cp "$dest/linux" "$out/linux"
cp -a "$dest/modules" "$out/modules"
cp "$dest/config" "$dest/kernel-version" "$out/"
printf '%s\n' "$key" >"$out/.key"
note "$out: UML $(cat "$out/kernel-version")"

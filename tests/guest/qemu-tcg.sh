#!/bin/sh
# Boots iovm's default guest image (tools/mkguest.sh) under QEMU TCG, runs a
# command or a script in it and exits with that command's exit status. The
# real-driver tests (suite 'guest') build on it; see tests/guest/README.md.
set -eu

usage() {
	cat <<'EOF'
usage: qemu-tcg.sh [OPTIONS] [-- QEMU_ARGS...]
Boot the default guest image under QEMU TCG and run a command in it; exit
with the command's status.
  -c CMD          shell command to run in the guest (as with sh -c)
  -s FILE         POSIX sh script to run in the guest (copied in as /iovm/script)
  -f HOST[:PATH]  copy a host file into the guest at PATH (default
                  /iovm/BASENAME); repeatable
  -g DIR          guest image directory (default $IOVM_GUEST, else
                  build/guest of this repository)
  -t SECONDS      time limit for the whole VM (default 300; 0 = none)
  -m SIZE         guest memory, QEMU syntax (default 1G)
  -p N            vCPUs (default 1)
  -a ARGS         more kernel command line parameters
  -n              user networking: a virtio-net NIC, DHCP in the guest;
                  the host is 10.0.2.2 from inside
  -l FILE         also write the console output to FILE
  -k              boot bzImage (default: vmlinux through its PVH entry,
                  which skips the kernel's self-decompression under TCG)
  -B              QEMU's default firmware (SeaBIOS) instead of qboot
  -v              kernel messages on the console (default: quiet)
  -h              this help
Everything after -- is passed to qemu-system-x86_64 unchanged (devices,
chardevs, memory backends...). Without -c or -s, an interactive shell whose
exit status is returned.
Exit status: the guest command's; 124 when the time limit hit; 125 when the
VM ended without the guest reporting a status (QEMU error, panic, crash).
EOF
}

die() { echo "qemu-tcg: $*" >&2; exit 125; }

repo=$(cd "$(dirname "$0")/../.." && pwd)
guest=${IOVM_GUEST:-$repo/build/guest}
cmd=
script=
files=
timeout=300
mem=1G
cpus=1
append=
net=0
log=
kernel=vmlinux
quiet=quiet
# qboot starts the kernel faster than SeaBIOS and leaves the console clean.
bios=/usr/share/qemu/qboot.rom
[ -f "$bios" ] || bios=
have_cmd=0
while getopts c:s:f:g:t:m:p:a:nl:kBvh opt; do
	case "$opt" in
	c) cmd=$OPTARG; have_cmd=1 ;;
	s) script=$OPTARG ;;
	f) files="$files
$OPTARG" ;;
	g) guest=$OPTARG ;;
	t) timeout=$OPTARG ;;
	m) mem=$OPTARG ;;
	p) cpus=$OPTARG ;;
	a) append="$append $OPTARG" ;;
	n) net=1 ;;
	l) log=$OPTARG ;;
	k) kernel=bzImage ;;
	B) bios= ;;
	v) quiet= ;;
	h) usage; exit 0 ;;
	*) usage >&2; exit 125 ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 0 ] || [ "$1" != -- ] || shift
# What remains: arguments for QEMU (after --).

[ "$have_cmd" = 0 ] || [ -z "$script" ] || die "-c and -s exclude each other"
case "$timeout" in ''|*[!0-9]*) die "-t wants whole seconds, got '$timeout'" ;; esac
case "$cpus" in ''|*[!0-9]*|0) die "-p wants a vCPU count, got '$cpus'" ;; esac
[ -f "$guest/$kernel" ] && [ -f "$guest/initramfs.cpio.gz" ] ||
	die "no guest image in $guest (build it: tools/mkguest.sh $guest)"
[ -z "$script" ] || [ -r "$script" ] || die "cannot read script $script"
command -v qemu-system-x86_64 >/dev/null ||
	die "qemu-system-x86_64 is missing (run tools/install-deps.sh)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/qemu-tcg.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# Files for the guest travel in a second cpio archive appended to the image's
# initramfs; the kernel unpacks both into its rootfs.
extra="$tmp/extra"
mkdir -p "$extra/iovm"
add_file() { # host path, guest path
	[ -f "$1" ] && [ -r "$1" ] || die "cannot read file $1"
	case "$2" in /*) ;; *) die "guest path must be absolute: $2" ;; esac
	mkdir -p "$extra$(dirname "$2")"
	cp -p "$1" "$extra$2"
}
IFS_SAVE=$IFS
IFS='
'
for spec in $files; do
	[ -n "$spec" ] || continue
	case "$spec" in
	*:*) add_file "${spec%%:*}" "${spec#*:}" ;;
	*) add_file "$spec" "/iovm/$(basename "$spec")" ;;
	esac
done
IFS=$IFS_SAVE

run=
if [ "$have_cmd" = 1 ]; then
	enc=$(printf '%s\n' "$cmd" | base64 -w0)
	# The x86 kernel command line holds 2047 bytes: longer commands go in
	# as a script file.
	if [ ${#enc} -le 1400 ]; then
		run="iovm.cmd=$enc"
	else
		printf '%s\n' "$cmd" >"$extra/iovm/script"
		run="iovm.script=/iovm/script"
	fi
elif [ -n "$script" ]; then
	cp "$script" "$extra/iovm/script"
	run="iovm.script=/iovm/script"
fi

# The uncompressed archive unpacks seconds faster under TCG than the .gz.
base="$guest/initramfs.cpio"
[ -f "$base" ] || base="$guest/initramfs.cpio.gz"
initrd=$base
if [ -n "$(find "$extra" -type f)" ]; then
	initrd="$tmp/initrd"
	cp "$base" "$initrd"
	# Start the second archive on a 4-byte boundary, as cpio wants.
	pad=$(( (4 - $(wc -c <"$initrd") % 4) % 4 ))
	[ "$pad" = 0 ] || head -c "$pad" /dev/zero >>"$initrd"
	(cd "$extra" && find . | LC_ALL=C sort |
		cpio -o -H newc -R 0:0 --quiet) | gzip -n -1 >>"$initrd"
fi

if [ "$net" = 1 ]; then
	nic="-nic user,model=virtio-net-pci"
else
	nic="-nic none"
fi
# cryptomgr.notests: the crypto self-tests are a third of the kernel's boot
# work under TCG (2.40 -> 1.52 s of guest time to the command, -icount).
# no_timer_check: early in boot the kernel checks that the timer's
# interrupt arrives through the IO-APIC by counting the ticks of a short
# wall-clock delay; on a loaded host QEMU delivers too few of them in time
# and the kernel panics ("IO-APIC + timer doesn't work!": vhost-user.sh
# beside stress-ng and other test suites). The timer does work.
kargs="console=ttyS0 panic=-1 cryptomgr.notests no_timer_check $quiet$append $run"
fw=
[ -z "$bios" ] || fw="-bios $bios"

# shellcheck disable=SC2086
set -- qemu-system-x86_64 -accel tcg -m "$mem" -smp "$cpus" -nographic \
	-no-reboot $fw $nic -device isa-debug-exit,iobase=0xf4,iosize=1 \
	-kernel "$guest/$kernel" -initrd "$initrd" -append "$kargs" "$@"

if [ -z "$run" ]; then
	# Interactive: the terminal goes to the guest's console (Ctrl-A X quits).
	# The shell's exit status comes back through the exit port.
	rc=0
	"$@" || rc=$?
	[ $((rc & 1)) = 0 ] || exit $((rc >> 1))
	exit 125
fi

limit=
[ "$timeout" = 0 ] || limit="timeout -k 5 $timeout"
out="$tmp/console"
# shellcheck disable=SC2086
{
	rc=0
	$limit "$@" </dev/null || rc=$?
	echo "$rc" >"$tmp/rc"
} | tee "$out"
[ -z "$log" ] || cp "$out" "$log"
rc=$(cat "$tmp/rc")

if [ "$rc" = 124 ] && [ -n "$limit" ]; then
	echo "qemu-tcg: time limit of ${timeout}s hit" >&2
	exit 124
fi
# /init prints the exact status, then writes it to the exit port, which makes
# QEMU exit with (status << 1) | 1 (status clamped to 127). Both must agree.
status=$(tr -d '\r' <"$out" |
	sed -n 's/.*iovm-init: exit status \([0-9]*\)$/\1/p' | tail -n 1)
if [ -n "$status" ] && [ $((rc & 1)) = 1 ]; then
	port=$status
	[ "$port" -le 127 ] || port=127
	if [ $((rc >> 1)) = "$port" ]; then
		exit "$status"
	fi
fi
echo "qemu-tcg: the VM ended (QEMU status $rc) without the guest reporting" \
	"a status" >&2
exit 125

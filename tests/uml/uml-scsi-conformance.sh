#!/bin/sh
# libiscsi's SCSI conformance suite (iscsi-test-cu --dataloss -t SCSI, on a
# /dev/sgN node) in User-Mode Linux on two paths into iovm's one SCSI disk
# model (src/scsi/disk*.c), each on a fresh 64 MiB file (suite 'uml'):
#   lsi     Linux's sym53c8xx on iovm's LSI 53C895A (`iovm vhost-user-pci
#           --disk ...,if=lsi`, UML's PCI over virtio)
#   vscsi   Linux's virtio_scsi over virtio_uml against `iovm
#           vhost-user-scsi`
# It asserts the outcome: every failure must be on the list below
# (allowed_list: the disk's known failures, issue 16, on both legs, and the
# one transport limit of the LSI leg); a failure not on it fails the test,
# and a listed test that no longer fails is reported so that the list
# shrinks. The suite's outcome for each test (pass, skip, fail) must be the
# same on both legs but for the LSI-only entries, and a test that fails on
# both must fail for the same reason (the same [FAILED] messages and failed
# assertions): the disk is the same code, so a difference is the LSI's (or
# the virtio-scsi HBA's) doing. Also fails if a leg did not run the whole
# suite, if the lists of tests differ, if the kernel's SCSI error handler
# had to step in (abort, reset, timeout), or if an iovm crashed, logged an
# error or did not exit 0 on SIGTERM. Prints each leg's CUnit summary, its
# counts (with the skips for a command the disk does not implement) and the
# libiscsi version; the list was measured with LIBISCSI_PIN below.
#
# Transport limits of the legs (printed per leg; Linux 6.1 sources). The
# largest SG_IO the suite sends is WriteSame16.Unmap's read-back of 65536
# blocks of 512 (32 MiB; it takes that step because the disk has 131072
# blocks and a MAXIMUM WRITE SAME LENGTH of 0 or >= 65536); traced (strace
# of SG_IO, this libiscsi) the next largest is 1 MiB. For 32 MiB to pass:
#   - the host's max_sectors (the block layer's max_hw_sectors) must be
#     65536 or more: iovm's virtio-scsi says 65536 (the disk's 32 MiB
#     MAX_XFER_BYTES / 512, src/virtio/scsi.h); sym53c8xx's template says
#     0xFFFF, one sector short, and nothing in the guest raises it.
#   - the block layer needs 32 MiB / 64 KiB (its default max_segment_size,
#     which neither driver changes) = 512 segments: iovm's seg_max is 1022
#     (sg_tablesize and max_segments in the guest); sym53c8xx has 96
#     (SYM_CONF_MAX_SG, a compile-time constant), 6 MiB at most.
#   - virtio_uml's queues must hold the chain (1022 segments, header and
#     response: 1024 descriptors, virtio 1.2 2.7.5.3.1): 256 entries by
#     default, virtio_uml.queue_size=1024 (tools/uml/patches/0007) here.
#   - sg builds at most sg_tablesize chunks of scatter_elem_sz bytes for a
#     transfer (sg_build_indirect): the default 32 KiB gives 1022 x 32 KiB
#     = 31.9 MiB, ENOMEM for 32 MiB; the guest script sets 64 KiB, the
#     segment size, so each chunk is one segment and 1022 of them 63.9 MiB.
#     Both legs get the same setting (96 x 64 KiB = 6 MiB on the LSI).
# So WriteSame16.Unmap passes on vscsi and fails on lsi only: the one
# difference between the legs this test accepts (allowed_list). No other
# test's transfer falls between the two legs' limits (6 MiB and 32 MiB); one
# that did would fail on the LSI alone and show up as a difference.
# usage: uml-scsi-conformance.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
. "$(dirname "$0")/lib.sh"
uml_require
# Each leg normally takes 1 to 2 minutes: only a hang reaches this.
UML_TIMEOUT=${UML_TIMEOUT:-1200}
. "$(dirname "$0")/vpci-lib.sh"
iovm=$IOVM	# the binary backend.sh starts
. "$(dirname "$0")/backend.sh"
command -v iscsi-test-cu >/dev/null || uml_skip "iscsi-test-cu (libiscsi-bin) missing"

vpci_tmpdir conf lsi
trap 'backend_kill; vpci_cleanup' EXIT
mkdir "$tmp/lsi" "$tmp/vscsi"

# The libiscsi the lists below were measured with; another version may run
# other tests or judge them otherwise (the run says so, and goes on).
LIBISCSI_PIN=1.19.0-3

# allowed_list: "LEG SUITE.TEST [TEXT]" for each failure that may still
# happen; with TEXT, only a failure whose reason (reason()) has that text.
# LEG "both": failures on both legs for the same reason. One is left, and
# it is the suite's: GetLBAStatus.UnmapSingle's second loop (libiscsi
# 1.19, test_get_lba_status_unmap_single.c) asks for the status at LBA
# i + 1 and then wants the first descriptor to start at i + LBPPB (logical
# blocks per physical block), which no target can give whenever LBPPB > 1:
# SBC-4 (5.8, GET LBA STATUS) has the first descriptor cover the STARTING
# LOGICAL BLOCK ADDRESS (sg_get_lba_status checks that too), and an extent
# starting at i + LBPPB does not cover i + 1. The
# disk reports 4096-byte physical blocks on a file system with 4 KiB blocks
# (LBPPB 8), a hint guests align to; it is not given up to please the test.
# LEG "lsi": the LSI leg's transport limits, the only tests allowed to
# differ between the legs (each must pass on vscsi): the 32 MiB SG_IO (see
# the header), and WRITE SAME's data-out of the wrong size: on a parallel
# bus the target asks for the one block it needs and cannot see what the
# initiator holds; sym53c8xx finds the mismatch itself and fails the
# command as a host error (DID_ERROR) before the disk is involved. On
# virtio-scsi the disk sees the buffer's size and answers ILLEGAL REQUEST.
allowed_list() {
	cat <<'EOF'
both GetLBAStatus.UnmapSingle lba offset in first descriptor
lsi WriteSame10.InvalidDataOutSize SCSI host error
lsi WriteSame16.InvalidDataOutSize SCSI host error
lsi WriteSame16.Unmap Failed to send READ16 command: SG_IO ioctl failed
EOF
}

# allowed LEG TEST: whether TEST may fail on LEG (as it did).
allowed() {
	local want
	want=$(allowed_list | awk -v l="$1" -v t="$2" '
		($1 == "both" || $1 == l) && $2 == t {
			f = 1; $1 = $2 = ""; sub(/^ +/, ""); print
		} END { exit !f }') || return 1
	[ -z "$want" ] || reason "$1" "$2" | grep -qF -- "$want"
}

# leg_only TEST: the leg TEST is listed for alone (nothing if "both").
leg_only() {
	allowed_list | awk -v t="$1" '$2 == t && $1 != "both" { print $1 }'
}

# The UML script of a leg: DRIVER's disk, the suite on its sg node, the
# limits the transport puts on SG_IO.
leg_script() {
	cat <<EOS
. "\$UML_TESTS/uml-wait.sh"
modprobe -d "\$UML_MODULES" $1
uml_wait_disk sd "modprobe $1"
q=/sys/block/\$UML_DISK/queue
hctl=\$(basename "\$(readlink -f /sys/block/\$UML_DISK/device)")
h=/sys/class/scsi_host/host\${hctl%%:*}
{
	echo "max_hw_sectors_kb \$(cat \$q/max_hw_sectors_kb)"
	echo "max_segments \$(cat \$q/max_segments)"
	echo "max_segment_size \$(cat \$q/max_segment_size)"
	echo "sg_tablesize \$(cat \$h/sg_tablesize)"
	echo "scatter_elem_sz \$(cat /sys/module/sg/parameters/scatter_elem_sz)"
	[ "$1" = sym53c8xx ] ||
		echo "virtio_uml.queue_size \$(cat /sys/module/virtio_uml/parameters/queue_size 2>/dev/null || echo '?')"
} >limits
# sg's chunk for a transfer it cannot take in its reserved buffer: 64 KiB,
# the block layer's segment size (header: 32 MiB in sg_tablesize chunks)
echo 65536 >/sys/module/sg/parameters/scatter_elem_sz
echo "scatter_elem_sz (set) \$(cat /sys/module/sg/parameters/scatter_elem_sz)" >>limits
date +%s >t0
iscsi-test-cu --dataloss --verbose -t SCSI /dev/\$UML_SG >cu.out 2>&1
echo \$? >cu.rc
date +%s >t1
EOS
	# sym53c8xx is unloaded before the power-off, as the suite's last
	# step on this disk (the power-off with it bound is uml-vpci-lsi's
	# to check: tools/uml/patches/0005)
	[ "$1" = sym53c8xx ] && echo "modprobe -d \"\$UML_MODULES\" -r sym53c8xx"
	return 0
}

# leg_fail LEG REASON: the leg's logs, then FAIL.
leg_fail() {
	_uml_tail "$tmp/$1/output.log" 20
	_uml_tail "$tmp/$1/cu.out" 20
	_uml_tail "$tmp/$1/console.log" 40
	_uml_tail "$tmp/$1/$1.log" 40	# iovm vhost-user-pci (vpci_start)
	_uml_tail "$tmp/$1/iovm.log" 40	# iovm vhost-user-scsi (backend_start)
	uml_fail "$1: $2"
}

# leg_run LEG DRIVER KERNEL_ARG...: boots UML on the leg's script, checks
# it ran the suite to its end without the SCSI error handler.
leg_run() {
	local d=$tmp/$1 st=0 rc l=$1
	leg_script "$2" >"$d/script.sh"
	shift 2
	uml_run "$d" "$d/script.sh" "$@" || st=$?
	set -- "$l"
	eval "secs_$1=$UML_SECONDS"
	[ "$st" = 0 ] || leg_fail "$1" "the UML script exited $st"
	rc=$(cat "$d/cu.rc" 2>/dev/null)
	# 0, or 1 when some test failed; anything else is a crash or misuse
	case $rc in
	0|1) ;;
	*) leg_fail "$1" "iscsi-test-cu exited ${rc:-?}" ;;
	esac
	grep -q '^Run Summary:' "$d/cu.out" ||
		leg_fail "$1" "iscsi-test-cu did not get to its summary"
	if grep -iE 'operation started|timing out command|abort' "$d/console.log"; then
		leg_fail "$1" "the SCSI error handler stepped in (lines above)"
	fi
	eval "suite_$1=$(($(cat "$d/t1") - $(cat "$d/t0")))"
}

# parse LEG: from the suite's verbose output, LEG/tests (SUITE.TEST
# outcome, in run order) and LEG/lines (SUITE.TEST, a space, each line the
# suite printed for that test; names have no spaces, lines may have tabs).
# A test is "skip" if it passed with a [SKIPPED] notice (the suite passes
# what the disk does not implement).
parse() {
	awk -v out="$tmp/$1/lines" '
	/^Suite: / { suite = $2; cur = ""; next }
	/^Run Summary:/ { cur = ""; next }
	/^  Test: / {
		name = $0; sub(/^  Test: /, "", name); sub(/ \.\.\..*$/, "", name)
		cur = suite "." name; skip = 0; done = 0
	}
	cur == "" { next }
	{ print cur " " $0 >out }
	done { next }
	/\[SKIPPED\]/ { skip = 1 }
	/(^|\.\.\.)passed$/ { print cur, (skip ? "skip" : "pass"); done = 1; next }
	/(^|\.\.\.)FAILED$/ { print cur, "fail"; done = 1 }
	' "$tmp/$1/cu.out" >"$tmp/$1/tests"
	: >>"$tmp/$1/lines"
}

# reason LEG TEST: what the suite said about a failure (its [FAILED]
# messages and the failed assertions).
reason() {
	lines "$1" "$2" | grep -E '\[FAILED\]|^ +[0-9]+\. '
}

# lines LEG TEST: the suite's lines for TEST.
lines() {
	awk -v t="$2" '$1 == t { print substr($0, length(t) + 2) }' "$tmp/$1/lines"
}

# A leg's counts from its tests file, and a check against its Run Summary.
counts() {
	local f=$tmp/$1/tests n ran
	n=$(wc -l <"$f")
	ran=$(awk '$1 == "tests" { print $3 }' "$tmp/$1/cu.out")
	[ "$n" -gt 0 ] || leg_fail "$1" "no test ran"
	[ "$n" = "${ran:-}" ] ||
		leg_fail "$1" "$n test outcomes read, the suite's summary says ${ran:-?} ran"
	[ -z "$(cut -d' ' -f1 "$f" | sort | uniq -d)" ] ||
		leg_fail "$1" "a test name appears twice: $(cut -d' ' -f1 "$f" | sort | uniq -d | head -3)"
	echo "--- $1: the suite's summary"
	sed -n '/^Run Summary:/,/^Elapsed time/p' "$tmp/$1/cu.out"
	printf '%s: %d tests: %d pass, %d skip (%d: command not implemented), %d fail; suite %d s, UML %s s\n' \
		"$1" "$n" "$(grep -c ' pass$' "$f")" "$(grep -c ' skip$' "$f")" \
		"$(unimplemented "$1" | wc -l)" "$(grep -c ' fail$' "$f")" "$2" "$3"
	echo "$1 limits: $(tr '\n' ' ' <"$tmp/$1/limits")"
	unimplemented "$1" | while read -r t; do
		echo "  $1 skips, command not implemented: $t: $(lines "$1" "$t" |
			grep -m1 -iE '\[SKIPPED\]' | sed 's/^.*\[SKIPPED\] *//' |
			cut -c1-90)"
	done
}

# other_skips LEG: the skips for another reason, by the suite's first
# [SKIPPED] line (count, line).
other_skips() {
	local t
	unimplemented "$1" >"$tmp/$1/unimpl"
	awk '$2 == "skip" { print $1 }' "$tmp/$1/tests" | grep -vxFf "$tmp/$1/unimpl" |
	while read -r t; do
		lines "$1" "$t" | grep -m1 '\[SKIPPED\]' |
			sed 's/^.*\[SKIPPED\] *//; s/[0-9][0-9]*/N/g' | cut -c1-100
	done | sort | uniq -c | sort -rn
}

# unimplemented LEG: the skipped tests whose [SKIPPED] notice says the
# command is not there: the suite's check_result() prints "[SKIPPED] OP is
# not implemented." for INVALID COMMAND OPERATION CODE, some tests "... is
# not implemented on target", "OP is not supported" or "PROUT Not
# Supported" (the command was refused, or REPORT SUPPORTED OPERATION CODES
# or a VPD page said it is not there).
unimplemented() {
	local t
	awk '$2 == "skip" { print $1 }' "$tmp/$1/tests" | while read -r t; do
		lines "$1" "$t" | grep -qiE '\[SKIPPED\].*(not implemented|not supported)' &&
			echo "$t"
	done
}

# lsi leg
truncate -s 64M "$tmp/lsi/disk.img"
vpci_start "$tmp/lsi" lsi --disk "path=$tmp/lsi/disk.img,if=lsi"
leg_run lsi sym53c8xx "$VPCI_DEV"
vpci_stop lsi
# iovm's LSI: a crash or a refusal of any PCI message counts
if grep -iE 'error|warning|dropping|assert|abort|crash|fatal|signal' "$tmp/lsi/lsi.log"; then
	leg_fail lsi "iovm logged the lines above"
fi
grep -q 'session over:.* (0 refused)' "$tmp/lsi/lsi.log" ||
	leg_fail lsi "iovm refused PCI messages or did not end the session"

# vscsi leg (backend_check below: no refusal, error or warning either)
truncate -s 64M "$tmp/vscsi/disk.img"
backend_start "$tmp/vscsi" vhost-user-scsi --disk "path=$tmp/vscsi/disk.img,target=0"
# 1024-entry queues: iovm's largest, and room for a chain of seg_max (1022)
# data segments with the header and the response (header)
leg_run vscsi virtio_scsi "virtio_uml.device=$tmp/vscsi/vhu.sock:8" virtio_uml.queue_size=1024
if grep -iE 'assert|abort|crash|fatal|signal' "$tmp/vscsi/iovm.log"; then
	leg_fail vscsi "iovm logged the lines above"
fi
backend_check "$tmp/vscsi"

parse lsi
parse vscsi
counts lsi "$suite_lsi" "$secs_lsi"
counts vscsi "$suite_vscsi" "$secs_vscsi"
echo "skips for another reason than a missing command (vscsi; the legs agree test by test below):"
other_skips vscsi
for l in lsi vscsi; do
	eval "s=\$suite_$l"
	[ "$s" -le 360 ] ||
		echo "note: the $l leg's suite took $s s (more than 6 minutes)"
done

# test by test: the legs against each other
fail=0
sort "$tmp/lsi/tests" >"$tmp/lsi.sorted"
sort "$tmp/vscsi/tests" >"$tmp/vscsi.sorted"
join -a1 -a2 -e none -o 0,1.2,2.2 "$tmp/lsi.sorted" "$tmp/vscsi.sorted" >"$tmp/joined"
while read -r t a b; do
	if [ "$a" != "$b" ]; then
		# a leg-only entry: fails there, passes on the other leg
		o=$(leg_only "$t")
		if { [ "$o" = lsi ] && [ "$a" = fail ] && [ "$b" = pass ]; } ||
		   { [ "$o" = vscsi ] && [ "$b" = fail ] && [ "$a" = pass ]; }; then
			continue
		fi
		echo "DIFF: $t: lsi $a, vscsi $b"
	elif [ "$a" = fail ]; then
		reason lsi "$t" >"$tmp/r.lsi"
		reason vscsi "$t" >"$tmp/r.vscsi"
		cmp -s "$tmp/r.lsi" "$tmp/r.vscsi" && continue
		echo "DIFF: $t: fails on both, for different reasons"
	else
		continue
	fi
	fail=1
	for l in lsi vscsi; do
		echo "--- $l, $t:"
		lines "$l" "$t" | head -n 25
	done
done <"$tmp/joined"

# each leg against the list
unlisted=0
for l in lsi vscsi; do
	while read -r t o; do
		[ "$o" = fail ] || continue
		allowed "$l" "$t" && continue
		echo "FAILED, not on the list: $l: $t"
		lines "$l" "$t" | head -n 25
		unlisted=$((unlisted + 1))
	done <"$tmp/$l/tests"
done
echo "failures on the list (LEG TEST: the suite's first [FAILED] message on a leg it fails on):"
allowed_list | while read -r leg t _; do
	r=
	for l in lsi vscsi; do
		[ "$leg" = both ] || [ "$leg" = "$l" ] || continue
		o=$(awk -v t="$t" '$1 == t { print $2 }' "$tmp/$l/tests")
		case $o in
		fail)
			[ -n "$r" ] || r=$(reason "$l" "$t" | grep -m1 '\[FAILED\]')
			[ -n "$r" ] || r=$(reason "$l" "$t" | head -n 1) ;;
		"")	echo "  $leg $t: NOT RUN on $l (not in this libiscsi's suite?)"
			echo x >>"$tmp/notrun" ;;
		*)	echo "  $leg $t: now $o on $l: take it off the list" ;;
		esac
	done
	[ -z "$r" ] || echo "  $leg $t: $(echo "$r" | sed 's/^.*\[FAILED\] *//; s/^ *//' | cut -c1-200)"
done
v=$(dpkg-query -W -f='${Version}' libiscsi-bin 2>/dev/null)
echo "libiscsi-bin ${v:-?} (the list was measured with $LIBISCSI_PIN)"
[ "${v:-}" = "$LIBISCSI_PIN" ] ||
	echo "note: libiscsi-bin is not $LIBISCSI_PIN: failures off the list may be the suite's change"
[ "$fail" = 0 ] || uml_fail "the legs' outcomes differ (DIFF lines above)"
[ "$unlisted" = 0 ] || uml_fail "$unlisted failures not on the list (FAILED lines above)"
[ ! -s "$tmp/notrun" ] || uml_fail "a listed test did not run (NOT RUN above)"
echo "ok: $(wc -l <"$tmp/joined") tests; every failure is on the list, the legs differ only where it says; iovm logged no error and exited 0 on both"

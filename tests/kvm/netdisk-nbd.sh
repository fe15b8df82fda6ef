#!/bin/bash
# NBD disks under `iovm run` with the probe, one PART per run:
#   connect  the first connection is bounded: a listener that accepts and
#            never negotiates (UNIX and TCP) makes iovm fail at start-up
#            with one line after timeout=2, not hang
#   lookup   a name server that never answers (a private mount namespace's
#            /etc/resolv.conf names a UDP socket that reads and never
#            replies, for 30 s a try): the host name's lookup is bounded
#            by timeout=2 too, and start-up fails with one line saying so
#   mq       the probe's virtio-blk test on two vCPUs and two queues, on
#            nbdkit without multi-conn (both queues share one connection)
#            and with it (one connection each): the data is checked on the
#            host, nbdkit's log filter shows how many connections iovm made
#            and that every command it sent got its reply
#   blocksize  an export whose minimum block size is 4096 (nbdkit's
#            blocksize-policy filter) is a disk of 4096-byte blocks, and the
#            probe's virtio-blk test passes on it; one of 8192 is refused at
#            start-up with one line
#   tls      nbds+unix:// with a TLS pre-shared key (nbdkit --tls=require
#            --tls-psk): the probe's virtio-blk test passes and the data is
#            there; a wrong key, or a plain nbd+unix:// URI, fails at
#            start-up with one clear line
# Faults are made by construction (a server that never answers), never by
# timing.
# Usage: netdisk-nbd.sh PART IOVM PROBE_ELF BLK_CHECK
set -u
. "$(dirname "$0")/probe-lib.sh"
part=$1 iovm=$2 probe=$3 check=$4
need_kvm
"$iovm" run --help | grep -q 'nbd+unix' || { echo "SKIPPED: iovm built without libnbd"; exit 77; }
command -v nbdkit >/dev/null || { echo "SKIPPED: nbdkit is not installed (tools/install-deps.sh)"; exit 77; }
make_scratch
pids=""
trap 'for p in $pids; do kill -9 "$p" 2>/dev/null; done; rm -rf "$scratch"' EXIT

wait_sock() { for _ in $(seq 100); do [ -S "$1" ] && return 0; sleep 0.1; done; die "no socket $1"; }
# nbdkit_start NAME ARGS...: nbdkit on $scratch/NAME.sock, daemonised. It
# writes its pid file after binding the socket: waiting for the socket
# alone could read an empty pid file and leave the server running.
nbdkit_start() {
	n=$1
	shift
	nbdkit -U "$scratch/$n.sock" -P "$scratch/$n.pid" "$@" 2>"$scratch/$n.err" ||
		{ cat "$scratch/$n.err"; die "nbdkit ($n) did not start"; }
	for _ in $(seq 100); do [ -s "$scratch/$n.pid" ] && break; sleep 0.1; done
	[ -s "$scratch/$n.pid" ] || die "nbdkit ($n) wrote no pid file"
	pids="$pids $(cat "$scratch/$n.pid")"
	wait_sock "$scratch/$n.sock"
}
# expect_refused LOG TEXT: iovm failed at start-up (no guest ran) with
# TEXT on its one error line.
expect_refused() {
	[ "$rc" != 0 ] || die "iovm exit status 0: the disk was not refused"
	grep -q '^probe:' "$1" && die "the guest ran: the disk was not refused"
	grep -q "iovm: error: .*$2" "$1" || die "no error line saying: $2"
	[ "$(grep -c 'iovm: error' "$1")" = 1 ] || die "expected one error line"
}

case $part in
connect)
	# Listeners that never answer: connections complete in the kernel
	# and are accepted and held, but nothing is ever sent.
	cat >"$scratch/hold.py" <<'EOF'
import os, socket, sys
if sys.argv[1] == 'unix':
    s = socket.socket(socket.AF_UNIX)
    s.bind(sys.argv[2])
else:
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
s.listen(64)
with open(sys.argv[3] + '.tmp', 'w') as f:
    f.write(str(s.getsockname()[1]) if sys.argv[1] == 'tcp' else 'unix')
os.rename(sys.argv[3] + '.tmp', sys.argv[3])
held = []
while True:
    held.append(s.accept()[0])
EOF
	python3 "$scratch/hold.py" unix "$scratch/hold.sock" "$scratch/u.ready" &
	pids="$pids $!"
	python3 "$scratch/hold.py" tcp - "$scratch/t.ready" &
	pids="$pids $!"
	for f in u t; do
		for _ in $(seq 100); do [ -f "$scratch/$f.ready" ] && break; sleep 0.1; done
		[ -f "$scratch/$f.ready" ] || die "the listener ($f) did not start"
	done
	port=$(cat "$scratch/t.ready")
	for uri in "nbd+unix:///d?socket=$scratch/hold.sock" "nbd://127.0.0.1:$port/d"; do
		run_probe "$scratch/c.log" 60 "$iovm" run --kernel "$probe" --memory 64M \
			--disk "path=$uri,timeout=2" --append "test=blk"
		expect_refused "$scratch/c.log" \
			"$uri: cannot connect: no answer from the NBD server within 2 s"
	done
	;;
lookup)
	unshare -m true 2>/dev/null ||
		{ echo "SKIPPED: needs a private mount namespace (unshare -m, as root)"; exit 77; }
	[ -f /etc/resolv.conf ] && [ -f /etc/hosts ] ||
		{ echo "SKIPPED: no /etc/resolv.conf or /etc/hosts to stand in for"; exit 77; }
	grep -q '^hosts:.*[[:space:]]dns' /etc/nsswitch.conf 2>/dev/null ||
		{ echo "SKIPPED: /etc/nsswitch.conf does not look host names up in DNS"; exit 77; }
	cat >"$scratch/dns.py" <<'EOF'
import os, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.bind(('127.0.0.2', 53))
    state = 'up'
except OSError as e:
    state = 'cannot bind 127.0.0.2:53: %s' % e.strerror
with open(sys.argv[1] + '.tmp', 'w') as f:
    f.write(state)
os.rename(sys.argv[1] + '.tmp', sys.argv[1])
if state != 'up':
    sys.exit(0)
while True:
    s.recvfrom(4096)	# read, never answer
EOF
	python3 "$scratch/dns.py" "$scratch/dns.ready" &
	pids="$pids $!"
	for _ in $(seq 100); do [ -f "$scratch/dns.ready" ] && break; sleep 0.1; done
	[ -f "$scratch/dns.ready" ] || die "the silent name server did not start"
	[ "$(cat "$scratch/dns.ready")" = up ] ||
		{ echo "SKIPPED: the silent name server: $(cat "$scratch/dns.ready")"; exit 77; }
	printf 'nameserver 127.0.0.2\noptions timeout:30 attempts:1\n' >"$scratch/resolv.conf"
	printf '127.0.0.1 localhost\n' >"$scratch/hosts"
	uri="nbd://stalled.invalid/d"
	# shellcheck disable=SC2016
	run_probe "$scratch/l.log" 60 unshare -m sh -c \
		'mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"' \
		sh "$scratch/resolv.conf" "$scratch/hosts" "$iovm" run --kernel "$probe" --memory 64M \
		--disk "path=$uri,timeout=2" --append "test=blk"
	expect_refused "$scratch/l.log" \
		"$uri: cannot connect: the host name's lookup did not end within 2 s"
	;;
mq)
	# run_mq NAME [FILTER PARAM]: the probe on 2 vCPUs with queues=2 on
	# a 32M memory export behind nbdkit's log filter (and FILTER); sets
	# $conns to the connections iovm made.
	run_mq() {
		n=$1
		# shellcheck disable=SC2086
		nbdkit_start "$n" ${2:-} --filter=log memory 32M logfile="$scratch/$n.log" ${3:-}
		run_probe "$scratch/$n.plog" 180 "$iovm" run --kernel "$probe" --cpus 2 \
			--memory 128M --disk "path=nbd+unix:///?socket=$scratch/$n.sock" \
			--append "test=blk seed=41 mode=msix indirect=1 queues=2"
		expect_pass "$scratch/$n.plog"
		grep -q 'queues_used=2' "$scratch/$n.plog" || die "the probe did not use both queues"
		# iovm has exited: every command it sent was answered
		cp "$scratch/$n.log" "$scratch/$n.iovm.log"
		conns=$(grep -c ' Connect ' "$scratch/$n.iovm.log")
		for c in Read Write Flush Zero Trim; do
			sent=$(grep -c " $c id=[0-9]* .*\.\.\.$" "$scratch/$n.iovm.log")
			done_=$(grep -c "\.\.\.$c id=[0-9]* return=0" "$scratch/$n.iovm.log")
			[ "$sent" = "$done_" ] ||
				die "$n: $sent $c commands reached nbdkit, $done_ completed"
		done
		[ "$(grep -c ' Write id=' "$scratch/$n.iovm.log")" -gt 100 ] || die "$n: too few writes logged"
		qemu-img convert -f raw -O raw "nbd+unix:///?socket=$scratch/$n.sock" "$scratch/$n.raw" ||
			die "cannot read the export back"
		check_pattern "$scratch/$n.plog" blk "$scratch/$n.raw" ||
			die "$n: the export does not hold what the guest wrote"
	}
	command -v qemu-img >/dev/null || { echo "SKIPPED: qemu-img is not installed"; exit 77; }
	run_mq single --filter=multi-conn multi-conn-mode=disable
	[ "$conns" = 1 ] || die "without multi-conn iovm made $conns connections, expected 1 shared"
	run_mq multi
	[ "$conns" = 2 ] || die "with multi-conn iovm made $conns connections, expected 2 (one per queue)"
	for c in 1 2; do
		grep -q "connection=$c Write id=" "$scratch/multi.iovm.log" ||
			die "with multi-conn, connection $c carried no writes"
	done
	;;
blocksize)
	nbdkit_start b4k --filter=blocksize-policy memory 32M blocksize-minimum=4096 \
		blocksize-preferred=4096
	run_probe "$scratch/b4k.plog" 180 "$iovm" run --kernel "$probe" --memory 128M \
		--disk "path=nbd+unix:///?socket=$scratch/b4k.sock" --append "test=blk seed=42 mode=poll"
	expect_pass "$scratch/b4k.plog"
	grep -q '^probe: blk dev=.* blk_size=4096 ' "$scratch/b4k.plog" ||
		die "the disk does not have 4096-byte blocks"
	nbdkit_start b8k --filter=blocksize-policy memory 32M blocksize-minimum=8192 \
		blocksize-preferred=8192
	run_probe "$scratch/b8k.log" 60 "$iovm" run --kernel "$probe" --memory 64M \
		--disk "path=nbd+unix:///?socket=$scratch/b8k.sock" --append "test=blk"
	expect_refused "$scratch/b8k.log" "minimum block size 8192 is more than 4096 bytes"
	;;
tls)
	command -v psktool >/dev/null || { echo "SKIPPED: psktool is not installed (gnutls-bin)"; exit 77; }
	nbdkit --dump-config | grep -qx 'tls=yes' || { echo "SKIPPED: nbdkit without TLS"; exit 77; }
	psktool -u alice -p "$scratch/keys.psk" >/dev/null 2>&1 || die "psktool failed"
	psktool -u alice -p "$scratch/wrong.psk" >/dev/null 2>&1 || die "psktool failed"
	nbdkit_start tls --tls=require --tls-psk="$scratch/keys.psk" memory 32M
	uri="nbds+unix://alice@/?socket=$scratch/tls.sock&tls-psk-file="
	if ! nbdinfo --size "$uri$scratch/keys.psk" >/dev/null 2>"$scratch/nbdinfo.err"; then
		grep -qi 'tls.*not\|not.*tls' "$scratch/nbdinfo.err" &&
			{ echo "SKIPPED: libnbd without TLS: $(cat "$scratch/nbdinfo.err")"; exit 77; }
		cat "$scratch/nbdinfo.err"
		die "nbdinfo cannot reach the TLS server"
	fi
	run_probe "$scratch/tls.plog" 180 "$iovm" run --kernel "$probe" --memory 128M \
		--disk "path=$uri$scratch/keys.psk" --append "test=blk seed=43 mode=poll"
	expect_pass "$scratch/tls.plog"
	nbdcopy "$uri$scratch/keys.psk" "$scratch/tls.raw" || die "cannot read the TLS export back"
	check_pattern "$scratch/tls.plog" blk "$scratch/tls.raw" ||
		die "the TLS export does not hold what the guest wrote"
	run_probe "$scratch/wrong.log" 60 "$iovm" run --kernel "$probe" --memory 64M \
		--disk "path=$uri$scratch/wrong.psk" --append "test=blk"
	expect_refused "$scratch/wrong.log" "$uri$scratch/wrong.psk: cannot connect: .*handshake"
	run_probe "$scratch/plain.log" 60 "$iovm" run --kernel "$probe" --memory 64M \
		--disk "path=nbd+unix:///?socket=$scratch/tls.sock" --append "test=blk"
	expect_refused "$scratch/plain.log" "cannot connect: .*requires TLS"
	;;
*)
	echo "usage: netdisk-nbd.sh connect|mq|blocksize|tls IOVM PROBE_ELF BLK_CHECK" >&2
	exit 2
	;;
esac
echo "PASS"

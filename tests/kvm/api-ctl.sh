#!/bin/bash
# The control socket (--api-socket) of real commands, through `iovm ctl`
# and raw clients: `iovm vhost-user-blk` with no front-end connected (every
# core command's output checked for its values, errors and exit statuses,
# --json, two clients at once, garbage and an oversized line on the
# socket, the socket's mode, shutdown making the back-end exit 0 and
# remove both sockets); `iovm vhost-user-scsi` with two disks; `iovm
# 9p-serve` with a share. Needs no /dev/kvm.
# Usage: api-ctl.sh IOVM
set -u
iovm=${1:?usage: api-ctl.sh IOVM}
command -v python3 >/dev/null || { echo "SKIPPED: python3 missing"; exit 77; }
work=$(mktemp -d "${MESON_BUILD_ROOT:-/tmp}/api-ctl.XXXXXX") || exit 1
pid=
cleanup() {
	[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
die() {
	echo "FAIL: $*"
	[ ! -f "$work/log" ] || { echo "--- iovm's log"; cat "$work/log"; }
	exit 1
}

api=$work/api.sock
ctl() { "$iovm" ctl --socket "$api" "$@"; }

# expect STATUS OUT-FILE ERR-FILE ARGS...: runs iovm ctl, checks its exit
# status.
expect() {
	local want=$1 out=$2 err=$3
	shift 3
	ctl "$@" >"$out" 2>"$err"
	local rc=$?
	[ "$rc" = "$want" ] || { cat "$out" "$err"; die "iovm ctl $*: exit $rc, expected $want"; }
}

# has FILE LINE: FILE holds LINE exactly.
has() {
	grep -qxF -- "$2" "$1" || { echo "--- $1:"; cat "$1"; die "no line '$2'"; }
}

wait_file() {
	for _ in $(seq 200); do
		[ -S "$1" ] && return 0
		kill -0 "$pid" 2>/dev/null || die "iovm exited before $1 appeared"
		sleep 0.05
	done
	die "no socket at $1"
}

# stop_by_api: `iovm ctl shutdown` ends the process with status 0 and
# both of its sockets gone.
stop_by_api() {
	local other=$1
	expect 0 "$work/out" "$work/err" shutdown
	[ ! -s "$work/out" ] || die "shutdown printed: $(cat "$work/out")"
	wait "$pid"
	local rc=$?
	pid=
	[ "$rc" = 0 ] || die "exit status $rc after shutdown, expected 0"
	[ ! -e "$api" ] || die "the API socket is still there"
	[ ! -e "$other" ] || die "$other is still there"
}

truncate -s 64M "$work/disk.img"
truncate -s 16M "$work/small.img"
mkdir "$work/share"

# ---- bad options ----
"$iovm" vhost-user-blk --socket "$work/v.sock" --disk "path=$work/disk.img" \
	--api-socket "" 2>"$work/err" && die "an empty --api-socket was taken"
grep -q -- "--api-socket: the path is empty" "$work/err" || die "message: $(cat "$work/err")"
"$iovm" vhost-user-blk --socket "$api" --disk "path=$work/disk.img" \
	--api-socket "$api" 2>"$work/err" && die "one path for both sockets was taken"
grep -q -- "--api-socket must differ from --socket" "$work/err" || die "message: $(cat "$work/err")"
echo keep >"$api"
"$iovm" vhost-user-blk --socket "$work/v.sock" --disk "path=$work/disk.img" \
	--api-socket "$api" 2>"$work/err" && die "a regular file at --api-socket was replaced"
grep -q "exists and is not a socket" "$work/err" || die "message: $(cat "$work/err")"
[ "$(cat "$api")" = keep ] || die "the file at --api-socket was changed"
rm -f "$api" "$work/v.sock"
"$iovm" ctl status >/dev/null 2>"$work/err"
[ $? = 2 ] || die "ctl without --socket: not exit 2"
grep -q -- "--socket PATH is required" "$work/err" || die "message: $(cat "$work/err")"
"$iovm" ctl --socket "$work/none.sock" status >/dev/null 2>"$work/err"
[ $? = 2 ] || die "ctl to no socket: not exit 2"
grep -q "cannot connect to $work/none.sock" "$work/err" || die "message: $(cat "$work/err")"
"$iovm" ctl --help | grep -q "KEY:=JSON" || die "ctl --help"

# ---- vhost-user-blk ----
"$iovm" vhost-user-blk --socket "$work/vblk.sock" \
	--disk "path=$work/disk.img,cache=writeback,queues=2" --api-socket "$api" \
	>"$work/log" 2>&1 &
pid=$!
wait_file "$api"
wait_file "$work/vblk.sock"
[ "$(stat -c %a "$api")" = 600 ] || die "socket mode $(stat -c %a "$api"), expected 600"

expect 0 "$work/out" "$work/err" version
has "$work/out" "version: $("$iovm" --version | sed 's/^iovm //')"
has "$work/out" "package: iovm"

expect 0 "$work/out" "$work/err" status
has "$work/out" "status: running"
has "$work/out" "running: yes"
has "$work/out" "command: vhost-user-blk"
has "$work/out" "pid: $pid"
grep -qE '^uptime-ms: [0-9]+$' "$work/out" || die "no uptime-ms: $(cat "$work/out")"

expect 0 "$work/out" "$work/err" --json query-status
python3 - "$work/out" "$pid" <<'EOF' || die "--json status: $(cat "$work/out")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
r = json.loads(lines[0])["return"]
assert r["status"] == "running" and r["running"] is True, r
assert r["command"] == "vhost-user-blk" and r["pid"] == int(sys.argv[2]), r
EOF

expect 0 "$work/out" "$work/err" disks
has "$work/out" "NAME   INTERFACE   SIZE  RO  CACHE      QUEUES  PATH"
has "$work/out" "disk0  virtio-blk  64M   no  writeback  2       $work/disk.img"
[ "$(wc -l <"$work/out")" = 2 ] || die "disks: $(cat "$work/out")"
expect 0 "$work/out" "$work/err" --json disks
python3 - "$work/out" "$work/disk.img" <<'EOF' || die "--json disks: $(cat "$work/out")"
import json, sys
d = json.loads(open(sys.argv[1]).read())["return"]
assert d == [{"name": "disk0", "path": sys.argv[2], "interface": "virtio-blk",
              "size": 64 << 20, "read-only": False, "cache": "writeback",
              "queues": 2}], d
EOF

expect 0 "$work/out" "$work/err" shares
has "$work/out" "NAME  TAG  RO  MSIZE  SECURITY  PATH"
[ "$(wc -l <"$work/out")" = 1 ] || die "shares: $(cat "$work/out")"

expect 0 "$work/out" "$work/err" commands
for c in query-version query-status query-commands query-disks query-shares shutdown \
	pause resume; do
	grep -qE "^$c +[a-z]" "$work/out" || die "commands lacks $c: $(cat "$work/out")"
done

# errors: exit 1, class and description on stderr, nothing on stdout
expect 1 "$work/out" "$work/err" pause
has "$work/err" "iovm ctl: GenericError: iovm vhost-user-blk has no vCPUs to pause (only iovm run has)"
[ ! -s "$work/out" ] || die "pause printed: $(cat "$work/out")"
expect 1 "$work/out" "$work/err" resume
grep -q "no vCPUs to resume" "$work/err" || die "resume: $(cat "$work/err")"
expect 1 "$work/out" "$work/err" query-nothing
has "$work/err" "iovm ctl: CommandNotFound: unknown command 'query-nothing' (query-commands lists them)"
expect 1 "$work/out" "$work/err" disks verbose=true
has "$work/err" "iovm ctl: GenericError: unknown argument 'verbose'"
expect 1 "$work/out" "$work/err" --json status x:='{"a": [1]}'
python3 -c 'import json,sys; e=json.loads(open(sys.argv[1]).read())["error"]; assert e["class"]=="GenericError" and "unknown argument" in e["desc"], e' \
	"$work/out" || die "--json error: $(cat "$work/out")"
expect 2 "$work/out" "$work/err" status x
grep -q "not KEY=VALUE" "$work/err" || die "bad argument: $(cat "$work/err")"
expect 2 "$work/out" "$work/err" status 'x:={'
grep -q "is not JSON" "$work/err" || die "bad JSON argument: $(cat "$work/err")"
expect 2 "$work/out" "$work/err" status a=1 a=2
grep -q "given twice" "$work/err" || die "argument twice: $(cat "$work/err")"

# Raw clients: two at once (one's request split around the other's), garbage,
# an oversized line, then good requests on the same connections; a client
# gone mid-line.
python3 - "$api" <<'EOF' || die "raw clients"
import json, socket, sys
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(sys.argv[1])
    return s, s.makefile("rb")
def reply(f):
    line = f.readline()
    assert line.endswith(b"\n"), line
    return json.loads(line)
a, fa = conn()
b, fb = conn()
a.sendall(b'{"execute": "query-ver')
b.sendall(b'{"execute": "query-status", "id": "b"}\n')
r = reply(fb)
assert r["id"] == "b" and r["return"]["status"] == "running", r
a.sendall(b'sion", "id": 1}\n')
r = reply(fa)
assert r["id"] == 1 and "version" in r["return"], r
a.sendall(b"\x00\xff\xfegarbage\n")
r = reply(fa)
assert r["error"]["class"] == "GenericError", r
a.sendall(b"not json at all\n[1,2]\n")
assert "not JSON" in reply(fa)["error"]["desc"]
assert "must be a JSON object" in reply(fa)["error"]["desc"]
b.sendall(b"x" * 200000 + b'\n{"execute": "query-disks", "id": 2}\n')
r = reply(fb)
assert "longer than 65536 bytes" in r["error"]["desc"], r
r = reply(fb)
assert r["id"] == 2 and r["return"][0]["name"] == "disk0", r
c, fc = conn()
c.sendall(b'{"execute": "shutd')
c.close()
a.sendall(b'{"execute": "query-status"}\n')
assert reply(fa)["return"]["status"] == "running"
EOF
kill -0 "$pid" || die "the back-end died"

# --watch: reports until the socket goes away (then exit 2)
expect 2 "$work/out" "$work/err" status --watch 0
grep -q "seconds from 1 to 3600" "$work/err" || die "--watch 0: $(cat "$work/err")"
ctl status --watch 1 >"$work/watch" 2>"$work/watch.err" &
wpid=$!
for _ in $(seq 600); do
	[ "$(grep -c '^status: running$' "$work/watch")" -ge 2 ] && break
	sleep 0.05
done
[ "$(grep -c '^status: running$' "$work/watch")" -ge 2 ] || die "--watch: $(cat "$work/watch")"
grep -qx "" "$work/watch" || die "--watch: no blank line between reports"
stop_by_api "$work/vblk.sock"
wait "$wpid"
[ $? = 2 ] || die "--watch did not end with status 2 once the socket was gone"
grep -Eq "cannot connect|closed without a reply" "$work/watch.err" ||
	die "--watch: $(cat "$work/watch.err")"

# ---- vhost-user-scsi: two disks, in --disk order ----
"$iovm" vhost-user-scsi --socket "$work/vscsi.sock" --disk "path=$work/disk.img" \
	--disk "path=$work/small.img,ro,target=3,queues=3" --api-socket "$api" \
	>"$work/log" 2>&1 &
pid=$!
wait_file "$api"
wait_file "$work/vscsi.sock"
expect 0 "$work/out" "$work/err" disks
has "$work/out" "NAME   INTERFACE    SIZE  RO   CACHE  QUEUES  PATH"
has "$work/out" "disk0  virtio-scsi  64M   no   none   3       $work/disk.img"
has "$work/out" "disk1  virtio-scsi  16M   yes  none   3       $work/small.img"
expect 0 "$work/out" "$work/err" status
has "$work/out" "command: vhost-user-scsi"
stop_by_api "$work/vscsi.sock"

# ---- 9p-serve ----
"$iovm" 9p-serve --share "path=$work/share,ro,msize=1M,security=none" \
	--listen "unix:$work/9p.sock" --api-socket "$api" >"$work/log" 2>&1 &
pid=$!
wait_file "$api"
wait_file "$work/9p.sock"
expect 0 "$work/out" "$work/err" shares
has "$work/out" "NAME    TAG  RO   MSIZE  SECURITY  PATH"
has "$work/out" "share0  -    yes  1M     none      $work/share"
expect 0 "$work/out" "$work/err" disks
[ "$(wc -l <"$work/out")" = 1 ] || die "9p-serve has disks: $(cat "$work/out")"
expect 0 "$work/out" "$work/err" status
has "$work/out" "command: 9p-serve"
stop_by_api "$work/9p.sock"
echo PASS

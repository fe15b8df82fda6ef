#!/bin/sh
# The statistics of `iovm vhost-user-blk --api-socket --metrics-listen`
# against Linux's own virtio_blk under QEMU TCG (one boot):
#   - fio in the guest writes 2048 random 4 KiB blocks (direct, psync: one
#     request at a time, so that nothing merges) and then reads 8 MiB
#     sequentially at depth 16 (which iovm merges); the guest prints fio's
#     own counts and /sys/block/vda/stat before and after each job;
#   - the write job's counts (fio's and the guest block layer's) are exactly
#     2048 writes and 8 MiB, and the back-end's query-stats, read once the
#     guest is gone, count exactly what the guest's block layer sent since
#     boot (its probe's reads included): reads, writes, their bytes; every
#     histogram sums to its operation count, nothing is in flight, and a
#     second API client connected all along is still answered;
#   - GET /metrics on --metrics-listen (python3, no curl) gives the same
#     counts in the Prometheus text, 404 for another path;
#   - garbage on the API socket gets an error object and the back-end goes
#     on answering.
# Usage: stats.sh IOVM_BINARY GUEST_DIR
set -eu

usage="usage: stats.sh IOVM GUEST_DIR"
iovm=$(realpath "${1:?$usage}")
guest=$(realpath "${2:?$usage}")

. "$(dirname "$(realpath "$0")")/lib.sh"
command -v python3 >/dev/null || skip "python3 missing"
"$iovm" vhost-user-blk --help 2>&1 | grep -q -- --api-socket ||
	skip "this iovm has no --api-socket"

make_work iovm-stats
truncate -s 64M "$work/disk.img"

"$iovm" vhost-user-blk --socket "$work/vu.sock" --disk "path=$work/disk.img" \
	--api-socket "$work/api.sock" --metrics-listen tcp:127.0.0.1:0 \
	>"$work/backend.log" 2>&1 &
backend=$!
pids="$pids $backend"
wait_sock "$work/vu.sock" "$work/backend.log" "vhost-user-blk"
wait_sock "$work/api.sock" "$work/backend.log" "the API"
[ "$(stat -c %a "$work/api.sock")" = 600 ] || die "API socket mode $(stat -c %a "$work/api.sock")"
port=
for _ in $(seq 50); do
	port=$(sed -n 's/.*metrics: serving GET \/metrics on tcp:127\.0\.0\.1:\([0-9]*\).*/\1/p' \
		"$work/backend.log")
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || { cat "$work/backend.log"; die "no metrics port in the log"; }

# A client that stays connected through the whole run (two at once).
python3 - "$work/api.sock" "$work/idle.ok" <<'EOF' &
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
f = s.makefile("rw")
# Holds its connection until the main client has finished, then asks.
for _ in range(6000):
    try:
        open(sys.argv[2] + ".go").close()
        break
    except OSError:
        time.sleep(0.1)
f.write('{"execute": "query-stats", "id": "idle"}\n')
f.flush()
r = json.loads(f.readline())
assert r.get("id") == "idle" and "disks" in r["return"], r
open(sys.argv[2], "w").close()
EOF
idle=$!
pids="$pids $idle"

cat >"$work/guest.sh" <<'EOF'
set -e
fail() { echo "GUEST FAIL: $*"; exit 1; }
[ -b /dev/vda ] || fail "no /dev/vda"
st() { echo "STAT$1 $(cat /sys/block/vda/stat)"; }
st 0
fio --name=w --filename=/dev/vda --direct=1 --ioengine=psync --iodepth=1 \
	--rw=randwrite --bs=4k --size=8M --randrepeat=1 \
	--output-format=json --output=/tmp/w.json || fail "fio write"
st 1
fio --name=r --filename=/dev/vda --direct=1 --ioengine=libaio --iodepth=16 \
	--rw=read --bs=16k --size=8M --output-format=json --output=/tmp/r.json ||
	fail "fio read"
st 2
echo "FIOW $(tr -d ' \t\n' </tmp/w.json)"
echo "FIOR $(tr -d ' \t\n' </tmp/r.json)"
EOF
"$harness" -g "$guest" -s "$work/guest.sh" -m 512M -t 600 -- \
	-object memory-backend-memfd,id=mem,size=512M,share=on \
	-numa node,memdev=mem \
	-chardev socket,id=c0,path="$work/vu.sock" \
	-device vhost-user-blk-pci,chardev=c0,num-queues=1 \
	>"$work/guest.console" 2>&1 || {
	cat "$work/guest.console"
	die "guest failed"
}

python3 - "$work/guest.console" "$work/api.sock" "$port" <<'EOF' || { cat "$work/backend.log"; die "statistics"; }
import http.client, json, re, socket, sys

console, api, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(console, errors="replace").read().replace("\r", "")

def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)

def line(prefix):
    m = re.search("^" + prefix + " (.*)$", text, re.M)
    if not m:
        fail("the guest printed no " + prefix)
    return m.group(1)

# /sys/block/vda/stat: reads, merges, sectors, ticks, writes, merges,
# sectors, ticks, in flight, ...
stat = [[int(x) for x in line("STAT%d" % i).split()] for i in range(3)]
fw = json.loads(line("FIOW"))["jobs"][0]["write"]
fr = json.loads(line("FIOR"))["jobs"][0]["read"]
print("guest: stat", stat, "fio writes", fw["total_ios"], "reads", fr["total_ios"])
if fw["total_ios"] != 2048 or fw["io_bytes"] != 8 << 20:
    fail("fio wrote %d ios, %d bytes" % (fw["total_ios"], fw["io_bytes"]))
if stat[1][4] - stat[0][4] != 2048 or (stat[1][6] - stat[0][6]) * 512 != 8 << 20:
    fail("the guest's block layer sent %d writes during the job" % (stat[1][4] - stat[0][4]))
if stat[0][4] != 0 or stat[2][4] != 2048:
    fail("writes outside the job: %r" % stat)
if fr["io_bytes"] != 8 << 20 or (stat[2][2] - stat[1][2]) * 512 != 8 << 20:
    fail("the read job read %d bytes" % fr["io_bytes"])

def client():
    s = socket.socket(socket.AF_UNIX)
    s.connect(api)
    return s, s.makefile("rw")

def ask(f, cmd, **args):
    req = {"execute": cmd, "id": cmd}
    if args:
        req["arguments"] = args
    f.write(json.dumps(req) + "\n")
    f.flush()
    r = json.loads(f.readline())
    if r.get("id") != cmd:
        fail("reply without our id: %r" % r)
    return r

s, f = client()
# Garbage first: an error object, and the connection goes on.
f.write("this is not json\n")
f.flush()
r = json.loads(f.readline())
if "error" not in r:
    fail("garbage got %r" % r)
r = ask(f, "query-stats", disk="nope")
if r.get("error", {}).get("class") != "DeviceNotFound":
    fail("an unknown disk got %r" % r)
r = ask(f, "query-stats", disk=3)
if "error" not in r:
    fail("a number for disk got %r" % r)
r = ask(f, "query-stats", disk="disk0")
d = r["return"]["disks"][0]
t = d["total"]
reads, rsect, writes, wsect = stat[2][0], stat[2][2], stat[2][4], stat[2][6]
print("back-end: reads %d (%d bytes, %d merged) writes %d (%d bytes)" %
      (t["read"]["ops"], t["read"]["bytes"], t["read"]["merged"],
       t["write"]["ops"], t["write"]["bytes"]))
if t["write"]["ops"] != writes or t["write"]["bytes"] != wsect * 512:
    fail("writes: back-end %d/%d, guest %d/%d" % (t["write"]["ops"], t["write"]["bytes"],
                                                 writes, wsect * 512))
if t["read"]["ops"] != reads or t["read"]["bytes"] != rsect * 512:
    fail("reads: back-end %d/%d, guest %d/%d" % (t["read"]["ops"], t["read"]["bytes"],
                                                reads, rsect * 512))
if t["inflight"] != 0 or t["errors"] != 0:
    fail("inflight %d errors %d" % (t["inflight"], t["errors"]))
for kind in ("read", "write", "flush", "discard", "write_zeroes"):
    k = t[kind]
    if sum(b["count"] for b in k["histogram"]) != k["ops"]:
        fail("the %s histogram does not sum to %d" % (kind, k["ops"]))
    if k["ops"] and not (0 < k["p50_ns"] <= k["p90_ns"] <= k["p99_ns"] <= k["p999_ns"]):
        fail("%s percentiles %r" % (kind, k))
q = sum(x["write"]["ops"] for x in d["queues"])
if q != writes:
    fail("the queues' writes sum to %d" % q)

# The same in the Prometheus text, over the API and over HTTP.
m = ask(f, "metrics")["return"]["text"]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("GET", "/metrics")
h = c.getresponse()
body = h.read().decode()
if h.status != 200 or not h.getheader("Content-Type").startswith("text/plain; version=0.0.4"):
    fail("GET /metrics: %d %s" % (h.status, h.getheader("Content-Type")))
for txt in (m, body):
    def val(series):
        mm = re.search("^" + re.escape(series) + " (\\S+)$", txt, re.M)
        if not mm:
            fail("no " + series)
        return float(mm.group(1))
    w = sum(val('iovm_disk_ops_total{disk="disk0",queue="%d",op="write"}' % x["queue"])
            for x in d["queues"])
    wc = sum(val('iovm_disk_latency_seconds_count{disk="disk0",queue="%d",op="write"}' % x["queue"])
             for x in d["queues"])
    if w != writes or wc != writes:
        fail("metrics: %d writes, %d in the histogram" % (w, wc))
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("GET", "/nothing")
if c.getresponse().status != 404:
    fail("GET /nothing was not 404")
print("STATS OK")
EOF
touch "$work/idle.ok.go"
wait "$idle" || die "the second API client failed"
[ -f "$work/idle.ok" ] || die "the second API client got no answer"
kill -TERM "$backend"
wait "$backend" || true
echo "PASS"

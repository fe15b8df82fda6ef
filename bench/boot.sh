#!/bin/bash
# Boot and port-I/O benchmark: iovm against QEMU (same run, same probe) and
# against the bare-KVM floor (bench/pio-floor).
#   bench/boot.sh [RUNS]       (from the source tree, after a build)
# Boot: wall time from exec to the probe's first serial output and to the
# VMM's exit (probe test=basic, minimal pio_n), and peak RSS; for iovm also
# its own RSS (peak minus guest RAM resident, from `iovm run -v`).
# PIO: the probe's pio_cpl0_ns / pio_cpl3_ns (test=pio, 2048 exits) on both
# VMMs, and pio-floor's ns per exit (64-bit CPL 0, like the probe's CPL 0
# loop), all three in every round. Medians over RUNS (default 5).
set -eu
cd "$(dirname "$0")/.."
runs=${1:-5}
iovm=build/iovm
probe=build/guest/probe/probe.elf
floor=build/bench/pio-floor
qemu=qemu-system-x86_64
for f in "$iovm" "$probe" "$floor"; do
	[ -x "$f" ] || [ -r "$f" ] || { echo "boot.sh: $f missing: build first" >&2; exit 1; }
done

python3 - "$runs" "$iovm" "$probe" "$floor" "$qemu" <<'PY'
import os, re, statistics, subprocess, sys, time

runs, iovm, probe, floor, qemu = int(sys.argv[1]), *sys.argv[2:]

def timed(cmd):
    """Runs cmd; returns (t_first_output, t_exit, maxrss_kib, stdout, stderr, rc)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    first = None
    out = b""
    while True:
        b = os.read(p.stdout.fileno(), 65536)
        if not b:
            break
        if first is None:
            first = time.monotonic() - t0
        out += b
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    t_exit = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return first, t_exit, ru.ru_maxrss, out.decode(errors="replace"), \
        err.decode(errors="replace"), p.returncode

def iovm_cmd(append):
    return [iovm, "run", "-v", "--kernel", probe, "--memory", "64M", "--append", append]

def qemu_cmd(append):
    return [qemu, "-enable-kvm", "-bios", "/usr/share/qemu/qboot.rom", "-m", "64M",
            "-kernel", probe, "-append", append, "-device",
            "isa-debug-exit,iobase=0xf4,iosize=1", "-nographic", "-no-reboot",
            "-nodefaults", "-serial", "stdio", "-display", "none"]

def med(xs):
    return statistics.median(xs) if xs else float("nan")

res = {"iovm": {"first": [], "exit": [], "rss": [], "own": [], "cpl0": [], "cpl3": []},
       "qemu": {"first": [], "exit": [], "rss": [], "own": [], "cpl0": [], "cpl3": []}}
floor_loops, floor_unrolled_l = [], []
for i in range(runs):
    # The floor runs in each round too, so all three see the same load.
    fl = subprocess.run([floor, "2048", "1"], capture_output=True, text=True,
                        check=True).stdout
    floor_loops.append(float(re.search(r"loop=out;dec;jnz .*median=(\d+)", fl).group(1)))
    floor_unrolled_l.append(float(re.search(r"loop=16x.*median=(\d+)", fl).group(1)))
    for name, mk in (("iovm", iovm_cmd), ("qemu", qemu_cmd)):
        first, t_exit, rss, out, err, rc = timed(mk("test=basic pio_n=16"))
        if rc != 1 or "probe: PASS" not in out:
            sys.exit(f"{name}: probe boot failed (status {rc}):\n{out}\n{err}")
        r = res[name]
        r["first"].append(first * 1000)
        r["exit"].append(t_exit * 1000)
        r["rss"].append(rss)
        m = re.search(r"iovm's own (\d+) KiB", err)
        if m:
            r["own"].append(int(m.group(1)))
        first, t_exit, rss, out, err, rc = timed(mk("test=pio pio_n=2048"))
        m = re.search(r"pio_cpl0_ns=(\d+) pio_cpl3_ns=(\d+)", out)
        if rc != 1 or not m:
            sys.exit(f"{name}: probe pio failed (status {rc}):\n{out}\n{err}")
        r["cpl0"].append(int(m.group(1)))
        r["cpl3"].append(int(m.group(2)))

floor_loop = med(floor_loops)
floor_unrolled = med(floor_unrolled_l)

print(f"runs={runs} (medians); host: {os.uname().release}, {os.cpu_count()} CPUs, "
      f"load {os.getloadavg()[0]:.2f}")
print("| VMM | first output ms | exit ms | peak RSS KiB | own RSS KiB | pio CPL0 ns | pio CPL3 ns |")
print("|---|---|---|---|---|---|---|")
for name in ("iovm", "qemu"):
    r = res[name]
    own = f"{med(r['own']):.0f}" if r["own"] else "n/a"
    print(f"| {name} | {med(r['first']):.1f} | {med(r['exit']):.1f} | {med(r['rss']):.0f} | "
          f"{own} | {med(r['cpl0']):.0f} | {med(r['cpl3']):.0f} |")
print(f"| floor (pio-floor) | | | | | {floor_loop:.0f} (out;dec;jnz), "
      f"{floor_unrolled:.0f} (16x out) | |")
for name in ("iovm", "qemu"):
    print(f"{name}: pio CPL0 / floor = {med(res[name]['cpl0']) / floor_loop:.2f}")
PY

#!/usr/bin/env python3
"""Summarises iovm's per-request I/O trace (a -Dio_trace=true build; the
format is in src/lib/iotrace.h): per queue thread and per phase (a run of
requests of one kind and depth, e.g. one probe job), the stage latencies of a
request, how many requests sit in the device and before it, how the thread
batches its io_uring_enter calls, and where its time goes.

    meson setup build-trace -Dio_trace=true && ninja -C build-trace
    mkdir -p /tmp/iot && rm -f /tmp/iot/t.*
    IOVM_IO_TRACE=/tmp/iot/t BUILD=build-trace bench/blk.sh --secs 3 \\
        --rounds 1 --pin 0,1 --only iovm,iovm-scsi
    python3 bench/io-trace.py /tmp/iot/t.*
    python3 bench/io-trace.py --compare /tmp/iot/t.A... /tmp/iot/t.B...

Stages (times in us): pop->submit, from the chain taken off the avail ring
to the io_uring_enter that hands its SQE to the kernel (split into
pop->queued, until the device hands it to the block queue, and
queued->submit); submit->reap, in the device (kernel and disk); reap->push,
completion seen to used entry written; push->notify, to the interrupt that
covers it (none in poll mode: suppressed); guest, from a head's push to its
next pop (the driver's time). "in device" is the time-weighted mean number
of requests between their submit enter and their reap; "before kernel"
between pop and submit enter. Thread time: spinning (blkq_spin), sleeping
(waiting enters, which may also submit), submit-only enters, the rest.
"""
import argparse
import bisect
import collections
import struct
import sys

HDR = struct.Struct('<8sIIQQQQIHH32s')
REC = struct.Struct('<QIIHB5x')
MAGIC = b'IOVMTRC1'

(POP, SUBMIT_Q, ENTER, WAKE, ENTER_DONE, REAP, REAP_PASS, PUSH, NOTIFY,
 NOTIFY_SKIPPED, SPIN_START, SPIN_END) = range(1, 13)
ENTER_SUBMIT, ENTER_WAIT, ENTER_GETEVENTS = range(3)
SPIN_WHY = ('timeout', 'cqe', 'avail')


def load(path):
    with open(path, 'rb') as f:
        data = f.read()
    if len(data) < HDR.size:
        sys.exit(f'{path}: too short for a trace header')
    (magic, version, rec_size, nrec, dropped, start, end, pid, queue, _,
     name) = HDR.unpack_from(data)
    if magic != MAGIC or version != 1 or rec_size != REC.size:
        sys.exit(f'{path}: not an iovm I/O trace (version 1)')
    body = data[HDR.size:HDR.size + nrec * REC.size]
    if len(body) != nrec * REC.size:
        sys.exit(f'{path}: truncated: {nrec} records announced')
    return {
        'path': path, 'name': name.rstrip(b'\0').decode(errors='replace'),
        'pid': pid, 'queue': queue, 'dropped': dropped,
        'start': start, 'end': end, 'recs': REC.iter_unpack(body),
        'nrec': nrec,
    }


class Req:
    __slots__ = ('pop', 'size', 'read', 'depth', 'drained', 'queued',
                 'group', 'submit', 'reap', 'push', 'notify', 'guest')

    def __init__(self, t, arg):
        self.pop = t
        self.size = arg & 0x7fffffff
        self.read = bool(arg >> 31)
        self.depth = 0          # popped and not pushed, itself included
        self.drained = False    # nothing was outstanding before it
        self.queued = self.group = self.submit = None
        self.reap = self.push = self.notify = self.guest = None

    def kind(self):
        return (kb(self.size), 'R' if self.read else 'W')


class Thread:
    """What one dump says, as time-stamped lists that phases cut."""

    def __init__(self):
        self.reqs = []          # in pop order
        self.enters = []        # (t, kind, SQEs)
        self.passes = []        # (t, completions) per reap pass
        self.notifies = []      # (t, pushes covered)
        self.skipped = []       # t of each suppressed interrupt
        self.spin_ends = []     # (t, why)
        self.spans = []         # (t0, t1, 'spin' | 'sleep' | 'submit')


def read_thread(tr):
    th = Thread()
    open_reqs = {}              # head -> Req popped, not pushed
    last_push = {}              # head -> its last push time
    pending_sq = []             # queued, SQE not yet at the kernel
    pending_notify = []         # pushed, no virtq_notify decision yet
    enter = spin = None         # (kind, start) of the open one
    anomalies = 0
    for t, hid, arg, _q, ev in tr['recs']:
        if ev == POP:
            r = Req(t, arg)
            if hid in open_reqs:
                anomalies += 1
            r.drained = not open_reqs
            open_reqs[hid] = r
            r.depth = len(open_reqs)
            if hid in last_push:
                r.guest = t - last_push[hid]
            th.reqs.append(r)
        elif ev == SUBMIT_Q:
            r = open_reqs.get(hid)
            if r:
                r.queued, r.group = t, arg
                pending_sq.append(r)
        elif ev == ENTER:
            th.enters.append((t, hid, arg))
            if arg:
                for r in pending_sq:
                    r.submit = t
                pending_sq = []
            if hid != ENTER_GETEVENTS:
                enter = (hid, t)
        elif ev in (WAKE, ENTER_DONE):
            if enter:
                k, t0 = enter
                th.spans.append((t0, t, 'sleep' if k == ENTER_WAIT
                                 else 'submit'))
                enter = None
        elif ev == REAP:
            r = open_reqs.get(hid)
            if r:
                r.reap = t
        elif ev == REAP_PASS:
            th.passes.append((t, arg))
        elif ev == PUSH:
            r = open_reqs.pop(hid, None)
            last_push[hid] = t
            if r:
                r.push = t
                pending_notify.append(r)
        elif ev == NOTIFY:
            for r in pending_notify:
                r.notify = t
            th.notifies.append((t, len(pending_notify)))
            pending_notify = []
        elif ev == NOTIFY_SKIPPED:
            # the driver did not want to hear of these pushes
            th.skipped.append(t)
            pending_notify = []
        elif ev == SPIN_START:
            spin = t
        elif ev == SPIN_END:
            if spin is not None:
                th.spans.append((spin, t, 'spin'))
                th.spin_ends.append((t, SPIN_WHY[hid] if hid < 3 else '?'))
                spin = None
    return th, anomalies


def split(reqs, gap_ns, probe=64):
    """Phases: runs of requests between the points where the queue was
    empty and either stayed so for gap_ns, or the kind of request (size,
    direction) or the depth the driver keeps (the peak over probe pops
    before and after, 2x apart) changes: one probe job each."""
    cuts = [0]
    last_push = None
    for i, r in enumerate(reqs):
        if i and r.drained:
            a, b = reqs[max(0, i - probe):i], reqs[i:i + probe]
            pa, pb = max(x.depth for x in a), max(x.depth for x in b)
            idle = last_push is not None and r.pop - last_push >= gap_ns
            if (idle or r.kind() != reqs[i - 1].kind() or
                    max(pa, pb) >= 2 * min(pa, pb)):
                cuts.append(i)
        if r.push is not None:
            last_push = r.push if last_push is None else max(last_push,
                                                             r.push)
    cuts.append(len(reqs))
    return [reqs[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def first(x):
    return x[0]


class Phase:
    def __init__(self, th, reqs):
        done = [r for r in reqs if r.push is not None]
        self.reqs = done
        self.first = reqs[0].pop
        self.last = max((r.push for r in done), default=self.first)
        self.peak = max(r.depth for r in reqs)
        f, l = self.first, self.last

        def inside(v):
            # (each list is in time order)
            return v[bisect.bisect_left(v, f, key=first):
                     bisect.bisect_right(v, l, key=first)]
        en = inside(th.enters)
        self.enters = collections.Counter(k for _, k, _ in en)
        self.sqes = [n for _, k, n in en if n and k != ENTER_GETEVENTS]
        ps = inside(th.passes)
        self.cqes = [n for _, n in ps if n]
        self.empty_passes = len(ps) - len(self.cqes)
        self.notifies = [n for _, n in inside(th.notifies)]
        self.skipped = (bisect.bisect_right(th.skipped, l) -
                        bisect.bisect_left(th.skipped, f))
        self.spins = collections.Counter(w for _, w in inside(th.spin_ends))
        self.spin_ns = self.sleep_ns = self.submit_ns = 0
        for t0, t1, kind in inside(th.spans):
            d = min(t1, l) - max(t0, f)
            if d > 0:
                setattr(self, kind + '_ns', getattr(self, kind + '_ns') + d)

    def window(self):
        return self.last - self.first


def analyse(tr, gap_ns):
    th, anomalies = read_thread(tr)
    return [Phase(th, p) for p in split(th.reqs, gap_ns)], anomalies


def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


def dist(v):
    v = sorted(v)
    if not v:
        return None
    return (pct(v, .5), pct(v, .9), pct(v, .99), sum(v) / len(v), len(v))


def occupancy(reqs, start, end, window):
    if not window:
        return 0.0
    return sum(getattr(r, end) - getattr(r, start) for r in reqs
               if getattr(r, start) is not None and
               getattr(r, end) is not None) / window


def kb(n):
    n &= ~511
    return f'{n >> 10}k' if n >= 1024 else f'{n}b'


def summarise(ph):
    reqs = ph.reqs
    dev = [r for r in reqs if r.submit is not None and r.reap is not None
           and r.submit <= r.reap]
    kinds = collections.Counter(r.kind() for r in reqs)
    (size, rw), _ = kinds.most_common(1)[0]
    us = 1e-3

    def d(pairs):
        return dist([(b - a) * us for a, b in pairs])
    st = collections.OrderedDict()
    st['pop->submit'] = d((r.pop, r.submit) for r in dev)
    st['  pop->queued'] = d((r.pop, r.queued) for r in dev
                            if r.queued is not None)
    st['  queued->submit'] = d((r.queued, r.submit) for r in dev
                               if r.queued is not None)
    st['submit->reap'] = d((r.submit, r.reap) for r in dev)
    st['reap->push'] = d((r.reap, r.push) for r in reqs
                         if r.reap is not None)
    st['push->notify'] = d((r.push, r.notify) for r in reqs
                           if r.notify is not None)
    st['guest (push->pop)'] = dist([r.guest * us for r in reqs
                                    if r.guest is not None])
    w = ph.window()
    s = {
        'label': f'{size} {rw} peak {ph.peak}',
        'reqs': len(reqs), 'secs': w * 1e-9,
        'not_sent': len(reqs) - len(dev),
        'stages': st,
        'in_device': occupancy(dev, 'submit', 'reap', w),
        'before_kernel': occupancy(dev, 'pop', 'submit', w),
        'sqes': ph.sqes, 'cqes': ph.cqes, 'empty_passes': ph.empty_passes,
        'notifies': ph.notifies, 'skipped': ph.skipped,
        'enters': ph.enters, 'spins': ph.spins,
        'groups': dist([r.group for r in reqs if r.group]),
        'share': {k: (getattr(ph, k + '_ns') / w if w else 0)
                  for k in ('spin', 'sleep', 'submit')},
    }
    s['share']['rest'] = max(0.0, 1 - sum(s['share'].values()))
    return s


def mean(v):
    return sum(v) / len(v) if v else 0.0


def fmt(x, width=8):
    return f'{"-":>{width}}' if x is None else f'{x:{width}.1f}'


def print_summary(tr, phases, anomalies, min_reqs):
    secs = (tr['end'] - tr['start']) * 1e-9
    print(f"== {tr['path']}: thread {tr['name']} (pid {tr['pid']}, queue "
          f"{tr['queue']}), {tr['nrec']} events, {tr['dropped']} dropped, "
          f"{secs:.2f} s")
    if tr['dropped']:
        print('   (buffer full: the end of the run is missing; raise '
              'IOVM_IO_TRACE_EVENTS)')
    if anomalies:
        print(f'   ({anomalies} heads popped again before their push)')
    shown = [ph for ph in phases if len(ph.reqs) >= min_reqs]
    small = len(phases) - len(shown)
    for i, ph in enumerate(shown):
        s = summarise(ph)
        at = (ph.first - tr['start']) * 1e-9
        print(f"\n### phase {i + 1} (at {at:.3f} s): {s['label']}: "
              f"{s['reqs']} requests in {s['secs']:.3f} s "
              f"({s['reqs'] / s['secs'] if s['secs'] else 0:.0f}/s)"
              + (f", {s['not_sent']} never at the kernel"
                 if s['not_sent'] else ''))
        print('\n| stage (us) | p50 | p90 | p99 | mean |')
        print('|---|---:|---:|---:|---:|')
        for k, v in s['stages'].items():
            if v:
                print(f'| {k} | {v[0]:.1f} | {v[1]:.1f} | {v[2]:.1f} '
                      f'| {v[3]:.1f} |')
        e, sh = s['enters'], s['share']
        print(f"\n- mean requests: in device {s['in_device']:.2f}, popped "
              f"before kernel {s['before_kernel']:.2f}"
              + (f"; requests per SQE (merge) {s['groups'][3]:.2f}"
                 if s['groups'] else ''))
        print(f"- enters: {e[ENTER_SUBMIT]} submit, {e[ENTER_WAIT]} wait, "
              f"{e[ENTER_GETEVENTS]} getevents (spin); SQEs per sending "
              f"enter {mean(s['sqes']):.2f} (max {max(s['sqes'], default=0)})")
        print(f"- CQEs per reap pass {mean(s['cqes']):.2f} ({len(s['cqes'])} "
              f"passes, {s['empty_passes']} empty); pushes per notify "
              f"{mean(s['notifies']):.2f} ({len(s['notifies'])} sent, "
              f"{s['skipped']} suppressed)")
        print(f"- thread time: spin {sh['spin']:.0%}, sleep {sh['sleep']:.0%}, "
              f"submit enters {sh['submit']:.0%}, rest {sh['rest']:.0%}; "
              'spins ended by ' + (', '.join(f'{k} {v}' for k, v in
                                             sorted(s['spins'].items()))
                                   or 'none'))
    if small:
        print(f'\n({small} phases of fewer than {min_reqs} requests left out)')
    print()


def compare(a, b, gap_ns, min_reqs):
    res = []
    for path in (a, b):
        tr = load(path)
        phases, _ = analyse(tr, gap_ns)
        res.append((tr, [summarise(p) for p in phases
                         if len(p.reqs) >= min_reqs]))
    (ta, sa), (tb, sb) = res
    print(f"== A: {ta['path']} ({ta['name']})\n== B: {tb['path']} "
          f"({tb['name']})")
    for i in range(max(len(sa), len(sb))):
        x = sa[i] if i < len(sa) else None
        y = sb[i] if i < len(sb) else None
        print(f"\n### phase {i + 1}: A {x['label'] if x else '-'}, "
              f"B {y['label'] if y else '-'}")
        print('\n| (us) | A p50 | A p99 | A mean | B p50 | B p99 | B mean |')
        print('|---|---:|---:|---:|---:|---:|---:|')
        keys = (x or y)['stages'].keys()
        for k in keys:
            row = [k]
            for s in (x, y):
                v = s['stages'][k] if s else None
                row += [fmt(v[0], 1), fmt(v[2], 1), fmt(v[3], 1)] if v \
                    else ['-'] * 3
            print('| ' + ' | '.join(row) + ' |')
        for k, f in (('in device', lambda s: f"{s['in_device']:.2f}"),
                     ('before kernel', lambda s: f"{s['before_kernel']:.2f}"),
                     ('SQEs/enter', lambda s: f"{mean(s['sqes']):.2f}"),
                     ('CQEs/pass', lambda s: f"{mean(s['cqes']):.2f}"),
                     ('pushes/notify', lambda s: f"{mean(s['notifies']):.2f}"),
                     ('spin/sleep/submit/rest', lambda s: '/'.join(
                         f"{s['share'][k]:.0%}" for k in
                         ('spin', 'sleep', 'submit', 'rest')))):
            print(f"| {k} | {f(x) if x else '-'} | | | "
                  f"{f(y) if y else '-'} | | |")


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('files', nargs='*', help='dump files (PREFIX.<pid>.<thread>.<n>)')
    p.add_argument('--gap', type=float, default=50.0, metavar='MS',
                   help='a new phase starts where the queue was empty for '
                        'MS ms (default 50), or the request kind or the '
                        'depth the driver keeps changes')
    p.add_argument('--min-reqs', type=int, default=100, metavar='N',
                   help='leave out phases of fewer requests (default 100)')
    p.add_argument('--compare', nargs=2, metavar=('A', 'B'),
                   help='two dump files side by side, phase by phase')
    o = p.parse_args()
    gap = int(o.gap * 1e6)
    if o.compare:
        compare(*o.compare, gap, o.min_reqs)
        return
    if not o.files:
        p.error('no dump files (or --compare A B)')
    for path in o.files:
        tr = load(path)
        phases, anomalies = analyse(tr, gap)
        print_summary(tr, phases, anomalies, o.min_reqs)


if __name__ == '__main__':
    main()

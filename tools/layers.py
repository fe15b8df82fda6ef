#!/usr/bin/env python3
"""Checks that iovm's source folders only include downwards.

Reads every #include "..." line under src/ and fails (exit 1) when a file
includes a header of a folder above its own layer (see LAYERS and
docs/ARCHITECTURE.md), a private header (*_internal.h, *_int.h) of another folder,
vm/machine.h from below the machine, or when the headers include each
other in a cycle. Prints the folder graph it found with -v.
Usage: tools/layers.py [-v] [SRC_DIR]
"""
import os
import re
import sys

# Top to bottom. A file may include headers of its own folder and of any
# folder on a lower line; folders on one line may not include each other.
LAYERS = [
    ["main.c"],                 # main(): picks the command
    ["cmd"],                    # the commands: options -> configuration -> start
    ["api"],                    # the control socket: JSON commands, statistics out
    ["arch/x86"],               # the x86 machine: boot protocols, ACPI/MP tables
    ["vhost"],                  # vhost-user transport (feeds the virtio models)
    ["virtio"],                 # virtio rings, models, virtio-pci transport
    ["scsi", "p9"],             # the SCSI target + LSI HBA, the 9P server + socket
    ["hw"],                     # PCI bus and the legacy PC devices
    ["vm", "block"],            # KVM VM and exit buses; the block backend
    ["config"],                 # src/config.[ch]: configuration types and their parser
    ["lib"],                    # helpers that include nothing of ours
]
# Top-level files that form one unit.
FILES = {"config.c": "config", "config.h": "config"}
# Headers only the machine's builders may include.
MACHINE_ONLY = {"vm/machine.h": {"main.c", "cmd", "arch/x86", "vm"}}

INCLUDE = re.compile(r'^\s*#\s*include\s+(["<])([^">]+)[">]')


def unit_of(rel):
    """The layer unit (folder, or a top-level file) a path belongs to."""
    d = os.path.dirname(rel)
    if not d:
        return FILES.get(rel, rel)
    for units in LAYERS:
        for u in units:
            if rel == u or rel.startswith(u + "/"):
                return u
    return d


def rank_of():
    r = {}
    for i, units in enumerate(LAYERS):
        for u in units:
            r[u] = i
    return r


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    verbose = "-v" in sys.argv[1:]
    src = args[0] if args else os.path.join(os.path.dirname(__file__), "..", "src")
    src = os.path.normpath(src)
    rank = rank_of()
    errors = []
    graph = {}      # unit -> set of units it includes
    hdeps = {}      # header -> headers it includes (for cycles)
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src)
            me = unit_of(rel)
            if me not in rank:
                errors.append(f"{rel}: folder {me} is in no layer (add it to tools/layers.py)")
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    # As cpp finds it: "x" next to the file first, then
                    # (like <x>) on the -Isrc path.
                    quoted, name = m.group(1) == '"', m.group(2)
                    here = os.path.normpath(os.path.join(os.path.dirname(rel), name))
                    if quoted and os.path.exists(os.path.join(src, here)):
                        inc = here
                    elif os.path.exists(os.path.join(src, os.path.normpath(name))):
                        inc = os.path.normpath(name)
                    elif quoted:
                        errors.append(f"{rel}:{n}: includes \"{name}\", which is no file under src/")
                        continue
                    else:
                        continue    # a system header
                    if inc.startswith(".."):
                        errors.append(f"{rel}:{n}: includes {name} from outside src/")
                        continue
                    them = unit_of(inc)
                    if rel.endswith(".h"):
                        hdeps.setdefault(rel, set()).add(inc)
                    if them == me:
                        continue
                    graph.setdefault(me, set()).add(them)
                    where = f"{rel}:{n}: includes {inc}"
                    if them not in rank:
                        errors.append(f"{where}: folder {them} is in no layer")
                    elif rank[them] <= rank[me]:
                        how = "a layer above" if rank[them] < rank[me] else "a folder of its own layer"
                        errors.append(f"{where}: {them} is {how} {me}")
                    if inc.endswith(("_internal.h", "_int.h")):
                        errors.append(f"{where}: a private header of {them}")
                    allowed = MACHINE_ONLY.get(inc)
                    if allowed is not None and me not in allowed:
                        errors.append(f"{where}: only {', '.join(sorted(allowed))} may include it")
    # cycles among headers
    state = {}

    def visit(h, stack):
        state[h] = 1
        stack.append(h)
        for d in sorted(hdeps.get(h, ())):
            if state.get(d) == 1:
                errors.append("include cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d, stack)
        stack.pop()
        state[h] = 2

    for h in sorted(hdeps):
        if h not in state:
            visit(h, [])
    if verbose or errors:
        for u in sorted(graph, key=lambda u: (rank.get(u, 99), u)):
            print(f"  {u} -> {', '.join(sorted(graph[u], key=lambda t: (rank.get(t, 99), t)))}")
    for e in errors:
        print("layers: " + e, file=sys.stderr)
    if errors:
        print(f"layers: {len(errors)} violation(s); the layers are in tools/layers.py and docs/ARCHITECTURE.md",
              file=sys.stderr)
        return 1
    print(f"layers: ok ({sum(len(v) for v in graph.values())} folder edges, all downwards; no header cycle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

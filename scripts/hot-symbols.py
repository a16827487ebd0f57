#!/usr/bin/env python3
"""Regenerates crates/taps-cli/hot-symbols.txt: the functions of the `taps` binary that
`taps connect` runs, which the linker places next to each other (see
crates/taps-cli/build.rs).

It runs the release `taps` under valgrind's callgrind (names not demangled) against a
small TCP sink on 127.0.0.1 and lists every function that executed (sorted by name). Run from the repository root after `cargo build --release -p
taps-cli`; needs valgrind and nm (binutils). A stale list costs nothing but locality: names that no longer
exist are ignored by the linker.

    python3 scripts/hot-symbols.py [path/to/taps]
"""

import os
import re
import selectors
import socket
import subprocess
import sys
import tempfile
import threading

OUT = "crates/taps-cli/hot-symbols.txt"
# The workloads: what `taps bench connect-cli` measures (TCP required, one byte per flow)
# and the command's start-up on its own.
TCP_ONLY = '{"transport":{"value":"TCP","precedence":2}}'


def sink(listener):
    """Accepts connections and reads them to EOF, closing each."""
    sel = selectors.DefaultSelector()
    listener.setblocking(False)
    sel.register(listener, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select():
            if key.fileobj is listener:
                while True:
                    try:
                        conn, _ = listener.accept()
                    except BlockingIOError:
                        break
                    conn.setblocking(False)
                    sel.register(conn, selectors.EVENT_READ)
            else:
                conn = key.fileobj
                try:
                    data = conn.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(conn)
                    conn.close()


def functions(callgrind_out):
    """Names of the functions with a cost block, in first-seen order (callgrind compresses
    names: `fn=(id) name` once, `fn=(id)` later)."""
    names, seen, order = {}, set(), []
    pattern = re.compile(r"^c?fn=\((\d+)\)(?: (.*))?$")
    with open(callgrind_out, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = pattern.match(line.rstrip("\n"))
            if not m:
                continue
            ident, name = m.group(1), m.group(2)
            if name:
                names[ident] = name
            if line.startswith("fn=") and ident not in seen:
                seen.add(ident)
                order.append(names.get(ident, ""))
    # Only symbols a linker can place: mangled Rust names and plain C ones; valgrind's
    # own annotations ("0x1234", "'2" recursion suffixes) are dropped.
    out = []
    for n in order:
        n = n.split("'")[0]
        if n and not n.startswith("0x") and n not in out:
            out.append(n)
    return out


def main():
    taps = sys.argv[1] if len(sys.argv) > 1 else "target/release/taps"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    port = str(listener.getsockname()[1])
    threading.Thread(target=sink, args=(listener,), daemon=True).start()
    runs = [
        ["connect", "127.0.0.1", port, "--flows", "64", "--send-bytes", "1", "--props", TCP_ONLY],
        ["--version"],
    ]
    symbols = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, args in enumerate(runs):
            out = os.path.join(tmp, f"cg.{i}")
            cmd = ["valgrind", "--tool=callgrind", "--demangle=no",
                   f"--callgrind-out-file={out}", taps] + args
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for s in functions(out):
                if s not in symbols:
                    symbols.append(s)
    # Only what the binary defines (libc's and the dynamic linker's functions ran too).
    nm = subprocess.run(["nm", "--defined-only", taps], check=True, capture_output=True, text=True)
    defined = {line.split()[-1] for line in nm.stdout.splitlines() if len(line.split()) == 3}
    # Sorted: what counts is which functions share the hot pages, not their order, and a
    # sorted list changes by the names that changed only.
    symbols = sorted(s for s in symbols if s in defined)
    with open(OUT, "w", encoding="utf-8") as f:
        f.write("\n".join(symbols) + "\n")
    print(f"{OUT}: {len(symbols)} functions")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Shows that one `write` of a short line with O_APPEND is not always whole
when its process is killed: Linux copies a buffered write into the file
page by page and, between two pages, stops if a fatal signal is pending, so
a line crossing a 4 KiB boundary of the file can end there, without its
newline. The crash harness's record files are written like this (see
src/bench/crash/records.rs and docs/benchmarks.md).

A child appends ~80-byte lines (one `write` each, then `fdatasync`) from six
threads; the parent kills it with SIGKILL 60-120 ms after it starts, looks
at the file's end, and starts the next child, `--kills` times:

    python3 scripts/torn-appends.py --kills 400

It prints each cut-off line (its length, and where in its page the file now
ends) and the count. Writes only in a new temp folder.
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time


def child(path):
    def append(thread):
        n = 0
        while True:
            line = "L%016x-%d\tconv_%s\tL%016x-%d\t%d\n" % (
                random.getrandbits(64), thread, "0" * 32, n, thread, thread)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, line.encode())
            os.fdatasync(fd)
            os.close(fd)
            n += 1

    for thread in range(6):
        threading.Thread(target=append, args=(thread,), daemon=True).start()
    time.sleep(3600)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=400)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "ledger")
        torn = 0
        for kill in range(args.kills):
            worker = subprocess.Popen([sys.executable, __file__, "--child", path])
            time.sleep(random.uniform(0.06, 0.12))
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait()
            try:
                data = open(path, "rb").read()
            except FileNotFoundError:
                continue
            if data and not data.endswith(b"\n"):
                torn += 1
                tail = len(data) - data.rfind(b"\n") - 1
                print(f"kill {kill}: a line cut off after {tail} bytes; "
                      f"the file ends at byte {len(data) % 4096} of a page", flush=True)
                # As the harness's next worker does: the next line starts whole.
                with open(path, "ab") as f:
                    f.write(b"\n")
        print(f"{args.kills} kills, {torn} lines cut off")


if __name__ == "__main__":
    main()

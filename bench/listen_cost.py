#!/usr/bin/env python3
"""listen_cost.py -- what the /debug/pprof listener costs (BENCHMARKS.md
section 10).

  python3 bench/listen_cost.py [ROUNDS]

1. Start-up: wall time of /bin/true under the shim, with and without
   PYROSCOPE_PPROF_ADDRESS (the constructor's socket/bind/listen), ROUNDS
   interleaved runs each (default 200), a new port per run.
2. Idle: a program that sleeps 10 s with the listener on; the CPU time of
   its helper process (the listener's home) and of the program itself,
   against the same run without the variable.
3. During scrapes: a program with one busy thread and 64 MiB live; the
   helper's CPU per /debug/pprof/profile?seconds=1 (10 in a row) and per
   /debug/pprof/heap (200 in a row), and the heap answer's latency.

The program's own threads never serve a request (the listener is in the
helper), so its cost to the program is indirect only: the helper's CPU on
a shared core.  Build first (make, and build/prog/scrape_target)."""
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SHIM = os.path.join(ROOT, "shim", "libpyroshim.so")
TARGET = os.path.join(ROOT, "build", "prog", "scrape_target")


def env(extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PYROSCOPE_", "LD_PRELOAD"))}
    e.update({"LD_PRELOAD": SHIM, "PYROSCOPE_OUTPUT_DIR": tempfile.gettempdir() + "/lc-prof"})
    e.update(extra)
    return e


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_ms(pid):
    """CPU time of all of pid's threads, from the scheduler's own
    nanosecond counters (/proc/PID/task/TID/schedstat), not clock ticks."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e6


def cpu_ticks_ms(pid):
    """CPU time of pid including its threads that have ended (which
    schedstat no longer shows), in 10 ms clock ticks: use over many
    requests."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def helper_of(pid):
    """The helper: a process named pyroshim with the program's command
    line (it is a fork of the program), other than the program."""
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        want = f.read()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == pid:
            continue
        try:
            with open("/proc/%s/comm" % d) as f:
                if f.read().strip() != "pyroshim":
                    continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if f.read() == want:
                    return int(d)
        except OSError:
            continue
    return None


def get(port, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    n = 0
    while True:
        b = s.recv(65536)
        if not b:
            break
        n += len(b)
    s.close()
    return n


def startup(rounds):
    times = {"shim": [], "shim + listener": []}
    for _ in range(rounds):
        for name in times:
            extra = {"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % free_port()} \
                if "listener" in name else {}
            t0 = time.perf_counter()
            subprocess.run(["/bin/true"], env=env(extra), check=True)
            times[name].append((time.perf_counter() - t0) * 1000)
    print("| configuration | min ms | median ms |")
    print("|---|---|---|")
    for name, t in times.items():
        print("| %s | %.3f | %.3f |" % (name, min(t), statistics.median(t)))


def run_target(threads, mib, listener, stop):
    extra = {"PYROSCOPE_PPROF_ADDRESS": "127.0.0.1:%d" % listener} if listener else {}
    p = subprocess.Popen([TARGET, str(threads), str(mib), stop, "120"], env=env(extra),
                         stdout=subprocess.DEVNULL)
    while not os.path.exists(stop + ".ready"):
        time.sleep(0.01)
    time.sleep(0.3)
    return p, helper_of(p.pid)


def end_target(p, stop):
    open(stop, "w").close()
    p.wait()
    os.unlink(stop)
    os.unlink(stop + ".ready")


def idle(tmp):
    print("| configuration | program CPU ms in 10 s | helper CPU ms in 10 s |")
    print("|---|---|---|")
    for name, port in (("shim", None), ("shim + listener", free_port())):
        stop = os.path.join(tmp, "stop")
        p, h = run_target(0, 0, port, stop)
        c0, h0 = cpu_ms(p.pid), cpu_ms(h)
        time.sleep(10)
        c1, h1 = cpu_ms(p.pid), cpu_ms(h)
        end_target(p, stop)
        print("| %s | %.2f | %.2f |" % (name, c1 - c0, h1 - h0))


def scrapes(tmp):
    """The helper's CPU per request, over many requests (each connection
    is a thread that has ended by the time it is read)."""
    port = free_port()
    stop = os.path.join(tmp, "stop")
    p, h = run_target(1, 64, port, stop)
    h0 = cpu_ticks_ms(h)
    for _ in range(10):
        n = get(port, "/debug/pprof/profile?seconds=1")
    h1 = cpu_ticks_ms(h)
    lat = []
    for _ in range(200):
        t0 = time.perf_counter()
        m = get(port, "/debug/pprof/heap")
        lat.append((time.perf_counter() - t0) * 1000)
    h2 = cpu_ticks_ms(h)
    end_target(p, stop)
    print("| scrape | answer bytes | helper CPU ms per request | latency ms (median, max) |")
    print("|---|---|---|---|")
    print("| profile?seconds=1 (10 in a row) | %d | %.1f | - |" % (n, (h1 - h0) / 10))
    print("| heap (200 in a row) | %d | %.2f | %.1f, %.1f |" % (m, (h2 - h1) / 200,
                                                             statistics.median(lat), max(lat)))


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as tmp:
        print("### Start-up: /bin/true, %d interleaved runs\n" % rounds)
        startup(rounds)
        print("\n### Idle\n")
        idle(tmp)
        print("\n### During scrapes (1 busy thread, 64 MiB live)\n")
        scrapes(tmp)


if __name__ == "__main__":
    main()

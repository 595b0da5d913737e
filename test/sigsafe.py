#!/usr/bin/env python3
"""PS_SIGSAFE marks exactly what a signal handler can reach.

Every definition of ours that a signal handler can reach must be marked
PS_SIGSAFE (common/ps.h), and no other, so that `grep PS_SIGSAFE` is the
list of code that must stay async-signal-safe.  What "can reach" means:

  roots   the shim's own handler (shim/sampler.c: handler), and the shim's
          definitions of the C library functions that signal-safety(7)
          lists as async-signal-safe, which a program may call from its own
          handlers (ROOTS below);
  edges   every direct call, from gcc's -fcallgraph-info of each source
          file, plus the calls gcc cannot see (INDIRECT below): libunwind
          calling back into our interposers while it walks a stack, and
          the ops that init.c registers with shim/process.c.

Not roots, on purpose: the exec family (signal-safety(7) lists execve, but
the shim's exec hooks flush the profile first, taking the worker's lock),
and exit (not async-signal-safe itself).

Usage: sigsafe.py [--show] SOURCE...  (run from the top directory; the
Makefile's `make sigsafe` passes every library source).  Prints
"sigsafe: N reachable, N marked, N wrong" and exits 1 on any difference.
"""
import os
import re
import subprocess
import sys
import tempfile

ROOTS = [
    "shim/sampler.c:handler",
    # signal-safety(7) functions the shim defines.
    "_exit", "_Exit", "sigaction", "signal", "sigset", "sigprocmask",
    "pthread_sigmask", "sigsuspend", "ppoll", "pselect", "pipe",
    # The waiting calls of hook_wait.c that signal-safety(7) lists.
    "read", "write", "recv", "recvfrom", "recvmsg", "send", "sendto", "sendmsg",
    "accept", "connect", "poll", "select", "clock_nanosleep", "sleep",
]

# Calls made through pointers.  libunwind, driven from the handler, calls
# dl_iterate_phdr to find unwind tables, syscall(SYS_write) to validate an
# address, pipe/pipe2 at its first use, and sigprocmask and
# pthread_mutex_lock around its cache lock -- all of which the shim
# interposes (hook_dl.c, hook_fd.c, hook_signal.c, hook_wait.c).
INDIRECT = {
    "shim/unwind.c:walk": ["dl_iterate_phdr", "syscall", "pipe", "pipe2", "sigprocmask",
                           "pthread_mutex_lock"],
    "ps_unwind_signal": ["dl_iterate_phdr", "syscall", "pipe", "pipe2",
                                       "sigprocmask", "pthread_mutex_lock"],
    # A program that put off joining its tree makes its tables at its
    # first record (init.c registers first_record with ps_stacktab_defer).
    "ps_stacktab_current": ["init/init.c:first_record"],
}


# Not followed: ps_next_cached looks the next definition up once, with
# dlsym, which is not async-signal-safe; every later call is a relaxed load
# (shim/next.h says so, and why it is accepted).  An inline function is a
# node of each unit that calls it.
COLD = {"ps_next_lookup"}


def ops_edges():
    """shim/process.c calls the ops that init/init.c registers:
    {process.c function: [registered functions]}."""
    init = open("init/init.c").read()
    block = re.search(r"struct ps_process_ops ops = \{(.*?)\};", init, re.S).group(1)
    field_fn = dict(re.findall(r"\.(\w+) = (\w+)", block))
    out, fn = {}, None
    for line in open("shim/process.c").read().splitlines():
        m = re.match(r"(\w+)\(", line)
        if m:
            fn = m.group(1)
        for field in re.findall(r"ops->(\w+)\(", line):
            target = field_fn[field]
            if re.search(r"^.*\bstatic\b.*\n%s\(" % target, init, re.M):
                target = "init/init.c:" + target
            out.setdefault(fn, []).append(target)
    return out


def compile_graph(sources, tmp):
    """Edges {caller: set(callee)} and definitions {node: (file, line)}."""
    edges, defs = {}, {}
    for src in sources:
        layer = src.split("/")[0]
        out = os.path.join(tmp, src.replace("/", "_") + ".o")
        # gcc: -fcallgraph-info is its own (GCC 10 and later).
        cmd = ["gcc", "-D_GNU_SOURCE", '-DPS_VERSION="sigsafe"', "-std=c11", "-O0",
               "-fcallgraph-info", "-I", "build/inc/" + layer, "-I", "build/gen",
               "-c", src, "-o", out]
        subprocess.run(cmd, check=True)
        ci = out[:-2] + ".ci"
        text = open(ci).read()
        for m in re.finditer(r'node: \{ title: "([^"]+)" label: "[^\\"]*\\n([^"]+)"( shape)?',
                             text):
            title, where, external = norm(m.group(1)), m.group(2), m.group(3)
            if external:
                continue
            # gcc labels a node with its first declaration: the definition
            # is in the translation unit, or in a header (static inline).
            name = title.split(":")[-1]
            for f in (norm(where.rsplit(":", 2)[0]), src):
                line = definition_line(f, name)
                if line:
                    defs[title] = (f, line)
                    break
        for m in re.finditer(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', text):
            edges.setdefault(norm(m.group(1)), set()).add(norm(m.group(2)))
    return edges, defs


def definition_line(path, name):
    """The line of `name(` at the start of a line of path, or 0."""
    if path.startswith("/") or not os.path.exists(path):
        return 0
    for i, l in enumerate(open(path).read().splitlines(), 1):
        if l.startswith(name + "("):
            return i
    return 0


def norm(name):
    """ "/abs/build/inc/shim/common/clock.h:f" -> "common/clock.h:f" """
    name = name.replace(os.getcwd() + "/", "")
    return re.sub(r"^build/inc/[a-z]+/", "", name)


def is_static(path, line):
    lines = open(path).read().splitlines()
    # The return type sits on the line above the name (STYLE.md).
    head = lines[line - 2] if line >= 2 else ""
    return re.search(r"\bstatic\b", head) is not None


def marked(path, line):
    lines = open(path).read().splitlines()
    return "PS_SIGSAFE" in lines[line - 2] or "PS_SIGSAFE" in lines[line - 1]


def main(argv):
    show = "--show" in argv
    sources = [a for a in argv if not a.startswith("--")]
    with tempfile.TemporaryDirectory() as tmp:
        edges, defs = compile_graph(sources, tmp)
    ours = defs
    # An external name resolves to our non-static definition of it.
    by_name = {}
    for node, (path, line) in ours.items():
        if not is_static(path, line):
            by_name.setdefault(node.split(":")[-1], []).append(node)
    for src, dsts in list(INDIRECT.items()) + list(ops_edges().items()):
        edges.setdefault(src, set()).update(dsts)
    for src in edges:
        if src.split(":")[-1] == "ps_next_cached":
            edges[src] -= COLD

    def resolve(name):
        if name in ours:
            return [name]
        return by_name.get(name, [])

    missing = [r for r in ROOTS if not resolve(r)]
    for r in missing:
        print("sigsafe: root %s is not defined any more: update ROOTS" % r)
    reach, todo = set(), [n for r in ROOTS for n in resolve(r)]
    while todo:
        n = todo.pop()
        if n in reach:
            continue
        reach.add(n)
        for callee in edges.get(n, ()):
            todo.extend(resolve(callee))
    # A definition in a header (static inline) is a node of every unit
    # that calls it: it is reachable when one of them is.
    reach_at = {ours[n] for n in reach}
    mark_at = {d for d in ours.values() if marked(*d)}
    name_at = {d: n.split(":")[-1] for n, d in ours.items()}
    wrong = len(missing)
    for d in sorted(reach_at - mark_at):
        print("sigsafe: %s:%d: %s is reachable from a signal handler but not marked PS_SIGSAFE"
              % (d[0], d[1], name_at[d]))
        wrong += 1
    for d in sorted(mark_at - reach_at):
        print("sigsafe: %s:%d: %s is marked PS_SIGSAFE but no signal handler reaches it"
              % (d[0], d[1], name_at[d]))
        wrong += 1
    # A PS_SIGSAFE on a prototype speaks for the definition.
    for path in sorted({p for p, _ in ours.values()} | {s.replace(".c", ".h") for s in sources}):
        if not path.endswith(".h") or not os.path.exists(path):
            continue
        for i, l in enumerate(open(path).read().splitlines(), 1):
            m = re.search(r"\b(\w+)\([^;]*\)\s*PS_SIGSAFE;", l)
            if m and not any(n.split(":")[-1] == m.group(1) for n in reach):
                print("sigsafe: %s:%d: %s is declared PS_SIGSAFE but no signal handler reaches it"
                      % (path, i, m.group(1)))
                wrong += 1
    if show:
        for n in sorted(reach):
            print("reachable: %s" % n)
    print("sigsafe: %d reachable, %d marked, %d wrong" % (len(reach_at), len(mark_at), wrong))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Trace correlation (issue 5): the run's root span, its correlation tags
and pprof labels, the TRACEPARENT handed to children, and the OTLP export.

The OTLP bodies the peer saved are decoded by protoc against
test/proto/otlp_trace_test.proto, a copy of the OTLP messages written
independently of uploader/otlp.proto; profiles by go tool pprof -tags.  Ids
are compared with what the program itself saw in its environment
(build/prog/trace_exit prints TRACEPARENT and TRACESTATE from main), so
every check ties two independent observations together."""
import os
import re
import shutil
import subprocess
import unittest

from common import PROG, ROOT, clean_env, have_go, pprof_tags, run
from test_upload import Peer, UploadTest

PROTO_DIR = os.path.join(ROOT, "test", "proto")
TP_IN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TRACE_IN, PARENT_IN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
TAGS = "env=dev,service=generator,version=1.0.0"

# W3C Trace Context test suite (test/test.py, traceparent cases): every one
# of these must start a new trace.
INVALID = [
    "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",   # uppercase
    "00-0af7651916cd43dd8448eb211c80319c-B7AD6B7169203331-01",
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   # version ff
    "00-00000000000000000000000000000000-b7ad6b7169203331-01",   # zero trace id
    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",   # zero parent
    "00-0af7651916cd43dd8448eb211c8031-b7ad6b7169203331-01",     # short trace id
    "00-0af7651916cd43dd8448eb211c80319c00-b7ad6b7169203331-01", # long trace id
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b71692033-01",     # short parent
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-1",    # short flags
    "0-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",    # short version
    "00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",   # separators
    "00-0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331-01",
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331_01",
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-",  # v00 is exactly 55
    "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",   # not hex
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0x",
    " 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # whitespace
]


def have_protoc():
    return shutil.which("protoc") is not None


def unescape(s):
    """Bytes of a protoc text-format string literal (C escapes)."""
    out, i = bytearray(), 0
    simple = {"n": 10, "r": 13, "t": 9, '"': 34, "'": 39, "\\": 92}
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode()
            i += 1
        elif s[i + 1] in simple:
            out.append(simple[s[i + 1]])
            i += 2
        elif s[i + 1] == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", s[i + 2:])
            out.append(int(m.group(0), 16))
            i += 2 + len(m.group(0))
        else:
            m = re.match(r"[0-7]{1,3}", s[i + 1:])
            out.append(int(m.group(0), 8))
            i += 1 + len(m.group(0))
    return bytes(out)


def parse_text(text):
    """protoc's text format as nested dicts of lists: {field: [value]}."""
    root, stack = {}, []
    cur = root
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            cur = stack.pop()
        elif line.endswith("{"):
            child = {}
            cur.setdefault(line[:-1].strip(), []).append(child)
            stack.append(cur)
            cur = child
        else:
            key, _, val = line.partition(": ")
            if val.startswith('"'):
                val = unescape(val[1:-1])
            elif re.match(r"^-?\d+$", val):
                val = int(val)
            cur.setdefault(key, []).append(val)
    return root


def any_value(v):
    if "string_value" in v:
        return v["string_value"][0].decode()
    if "int_value" in v:
        return v["int_value"][0]
    if "array_value" in v:
        return [any_value(x) for x in v["array_value"][0].get("values", [])]
    return v


def decode_spans(path):
    """Every span of an OTLP ExportTraceServiceRequest, flattened: ids as
    hex, attributes as {key: value}, service.name of its resource."""
    p = subprocess.run(["protoc", "--decode=opentelemetry.proto.collector.trace.v1."
                        "ExportTraceServiceRequest", "-I", PROTO_DIR,
                        os.path.join(PROTO_DIR, "otlp_trace_test.proto")],
                       stdin=open(path, "rb"), capture_output=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError("protoc could not decode %s: %s" % (path, p.stderr))
    out = []
    for rs in parse_text(p.stdout.decode()).get("resource_spans", []):
        res = {a["key"][0].decode(): any_value(a["value"][0])
               for a in rs["resource"][0].get("attributes", [])}
        for ss in rs.get("scope_spans", []):
            for s in ss.get("spans", []):
                out.append({
                    "trace_id": s["trace_id"][0].hex(), "span_id": s["span_id"][0].hex(),
                    "parent": s.get("parent_span_id", [b""])[0].hex(),
                    "trace_state": s.get("trace_state", [b""])[0].decode(),
                    "name": s["name"][0].decode(), "kind": s["kind"][0],
                    "start": s["start_time_unix_nano"][0], "end": s["end_time_unix_nano"][0],
                    "status": s.get("status", [{}])[0].get("code", ["STATUS_CODE_UNSET"])[0],
                    "flags": s.get("flags", [0])[0],
                    "attrs": {a["key"][0].decode(): any_value(a["value"][0])
                              for a in s.get("attributes", [])},
                    "service": res.get("service.name")})
    return out


def printed(r):
    """TRACEPARENT and TRACESTATE as trace_exit printed them."""
    lines = dict(l.split("=", 1) for l in r.out.decode().splitlines() if "=" in l)
    return lines["TRACEPARENT"], lines["TRACESTATE"]


@unittest.skipUnless(have_protoc(), "protoc is not installed")
class Trace(UploadTest):
    app = "itest.tracer"

    def traced(self, peer, argv, server=True, timeout=60, **extra):
        e = {"PYROSCOPE_TRACE_CORRELATION": "true", "PYROSCOPE_APPLICATION_NAME": self.app,
             "OTEL_EXPORTER_OTLP_ENDPOINT": peer.url}
        if server:
            e["PYROSCOPE_SERVER_ADDRESS"] = peer.url
        else:
            e["PYROSCOPE_OUTPUT_DIR"] = self.out
        e.update(extra)
        return run(argv, clean_env(e), timeout=timeout)

    def exit_prog(self, code=0, how="return", ms=20):
        return [os.path.join(PROG, "trace_exit"), str(code), how, str(ms)]

    def spans(self, peer):
        out = []
        for r in peer.records("/v1/traces"):
            self.assertEqual(r["content_type"], "application/x-protobuf")
            out.extend(decode_spans(r["payload"]))
        return out

    def span_of(self, peer, r):
        """The span of the run whose output is r: its id is the parent id
        of the TRACEPARENT it handed to children."""
        tp, _ = printed(r)
        sid = tp.split("-")[2]
        found = [s for s in self.spans(peer) if s["span_id"] == sid]
        self.assertEqual(len(found), 1, (tp, self.spans(peer)))
        return found[0]

    @unittest.skipUnless(have_go(), "go tool pprof is not installed")
    def test_span_joins_traceparent_and_ties_to_every_profile(self):
        peer = self.peer()
        r = self.traced(peer, self.exit_prog(3, "return", 1200), TRACEPARENT=TP_IN,
                        PYROSCOPE_TAGS=TAGS, PYROSCOPE_UPLOAD_INTERVAL="500ms",
                        PYROSCOPE_ALLOC_SAMPLE_BYTES="1")
        self.assertEqual((r.rc, r.err), (3, b""))
        (sp,) = self.spans(peer)
        tp, ts = printed(r)
        self.assertEqual(tp, "00-%s-%s-01" % (TRACE_IN, sp["span_id"]))
        self.assertEqual(ts, "(unset)")
        self.assertEqual((sp["trace_id"], sp["parent"]), (TRACE_IN, PARENT_IN))
        self.assertRegex(sp["span_id"], r"^[0-9a-f]{16}$")
        self.assertNotEqual(sp["span_id"], "0" * 16)
        self.assertEqual((sp["name"], sp["kind"], sp["service"]),
                         ("tracer.run", "SPAN_KIND_INTERNAL", self.app))
        self.assertEqual(sp["attrs"]["pyroscope.profile.id"], sp["span_id"])
        self.assertEqual(sp["attrs"]["process.exit.code"], 3)
        self.assertEqual(sp["status"], "STATUS_CODE_ERROR")
        self.assertEqual(sp["attrs"]["process.executable.name"], "trace_exit")
        self.assertEqual(sp["attrs"]["process.command_args"], self.exit_prog(3, "return", 1200))
        self.assertEqual(sp["flags"] & 0xff, 1, "the caller's sampled flag")
        # Every profile of the run: the documented tag order, the span's ids.
        name = "%s{%s,trace_id=%s,root_span_id=%s}" % (self.app, TAGS, TRACE_IN, sp["span_id"])
        recs = peer.ingest()
        self.assertGreaterEqual(len(peer.ingest("samples")), 2, "expected periodic uploads")
        self.assertGreaterEqual(len(peer.ingest("bytes")), 1)
        for rec in recs:
            self.assertEqual(rec["query"]["name"], name)
            # Within the span's life (profiling starts a few microseconds
            # before the span; the last interval ends before the span).
            self.assertTrue(sp["start"] - 10**8 <= rec["from_ns"] < rec["until_ns"] <= sp["end"])
            # Every sample carries both labels, with this run's ids only.
            tags = pprof_tags(rec["payload"])
            share = 100.0 if rec["units"] == "samples" else tags["span_id"][sp["span_id"]]
            self.assertIn(share, (100.0, None))
            self.assertEqual(tags.get("span_id"), {sp["span_id"]: share}, rec["units"])
            self.assertEqual(tags.get("trace_id"), {TRACE_IN: share}, rec["units"])

    def test_exit_status_by_exit_call_and_success(self):
        peer = self.peer()
        r = self.traced(peer, self.exit_prog(3, "exit"))
        self.assertEqual((r.rc, r.err), (3, b""))
        sp = self.span_of(peer, r)
        self.assertEqual((sp["attrs"]["process.exit.code"], sp["status"]), (3, "STATUS_CODE_ERROR"))
        self.assertLess(sp["start"], sp["end"])
        r = self.traced(peer, self.exit_prog(0, "exit"))
        self.assertEqual((r.rc, r.err), (0, b""))
        sp = self.span_of(peer, r)
        self.assertEqual(sp["attrs"]["process.exit.code"], 0)
        self.assertNotEqual(sp["status"], "STATUS_CODE_ERROR")
        # No TRACEPARENT: a new trace, the root, flags sampled and random.
        tp, _ = printed(r)
        self.assertEqual(sp["parent"], "")
        self.assertEqual(tp, "00-%s-%s-03" % (sp["trace_id"], sp["span_id"]))

    def test_existing_trace_id_tag_is_not_overwritten(self):
        peer = self.peer()
        r = self.traced(peer, self.exit_prog(0, "return", 150),
                        PYROSCOPE_TAGS="trace_id=mine,env=dev")
        self.assertEqual((r.rc, r.err), (0, b""))
        sp = self.span_of(peer, r)
        (rec,) = peer.ingest("samples")
        self.assertEqual(rec["query"]["name"],
                         "%s{trace_id=mine,env=dev,root_span_id=%s}" % (self.app, sp["span_id"]))

    def shell(self, sh, traceparent=None):
        """`sh -c 'echo $TRACEPARENT; trace_exit; true'` under the shim:
        (the TRACEPARENT the shell hands out, trace_exit's output, spans by
        executable name)."""
        path = shutil.which(sh)
        if not path:
            self.skipTest("%s is not installed" % sh)
        peer = self.peer()
        script = 'echo "$TRACEPARENT"; %s 0 return 20; true' % os.path.join(PROG, "trace_exit")
        extra = {"TRACEPARENT": traceparent} if traceparent else {}
        r = self.traced(peer, [path, "-c", script], server=False, **extra)
        self.assertEqual((r.rc, r.err), (0, b""))
        spans = {s["attrs"]["process.executable.name"]: s for s in self.spans(peer)}
        return r.out.decode().splitlines()[0], r, spans

    def test_sh_hands_its_span_to_its_children(self):
        shell_tp, r, spans = self.shell("sh", TP_IN)
        version, trace, shell_span, flags = shell_tp.split("-")
        self.assertEqual((version, trace, flags), ("00", TRACE_IN, "01"))
        self.assertNotEqual(shell_span, PARENT_IN)
        child = spans["trace_exit"]
        self.assertEqual((child["trace_id"], child["parent"]), (TRACE_IN, shell_span))
        self.assertEqual(printed(r)[0], "00-%s-%s-01" % (TRACE_IN, child["span_id"]))

    def test_bash_exports_the_span_it_hands_to_its_children(self):
        shell_tp, r, spans = self.shell("bash")
        self.assertEqual(sorted(spans), ["bash", "trace_exit"])
        sh, child = spans["bash"], spans["trace_exit"]
        self.assertEqual(sh["parent"], "")
        self.assertEqual(shell_tp, "00-%s-%s-03" % (sh["trace_id"], sh["span_id"]))
        self.assertEqual((child["trace_id"], child["parent"]), (sh["trace_id"], sh["span_id"]))

    # Debian's /bin/sh (dash) leaves through _exit(2), which runs no
    # destructor: the shim's _exit hands the last pass to its uploader.
    def test_sh_exports_the_span_it_hands_to_its_children(self):
        shell_tp, _, spans = self.shell("sh", TP_IN)
        self.assertIn("sh", spans)
        self.assertEqual(shell_tp.split("-")[2], spans["sh"]["span_id"])

    # bash defines its own setenv() and builds its variables from main's
    # envp: the shim exports with libc's setenv and gives main the updated
    # environment.
    def test_bash_joining_a_trace_hands_its_own_span_to_its_children(self):
        shell_tp, _, spans = self.shell("bash", TP_IN)
        sh, child = spans["bash"], spans["trace_exit"]
        self.assertEqual((sh["trace_id"], sh["parent"]), (TRACE_IN, PARENT_IN))
        self.assertEqual(shell_tp, "00-%s-%s-01" % (TRACE_IN, sh["span_id"]))
        self.assertEqual(child["parent"], sh["span_id"])

    def test_invalid_traceparents_restart_the_trace_with_one_line(self):
        peer = self.peer()
        seen = set()
        for bad in INVALID:
            r = self.traced(peer, self.exit_prog(), server=False, TRACEPARENT=bad)
            self.assertEqual(r.rc, 0, bad)
            lines = r.err.decode().splitlines()
            self.assertEqual(len(lines), 1, (bad, r.err))
            self.assertTrue(lines[0].startswith("pyroshim: TRACEPARENT="), lines)
            sp = self.span_of(peer, r)
            self.assertEqual(sp["parent"], "", bad)
            self.assertNotEqual(sp["trace_id"], TRACE_IN, bad)
            self.assertNotIn(sp["trace_id"], seen, "trace ids must be random")
            seen.add(sp["trace_id"])
            self.assertEqual(printed(r)[0], "00-%s-%s-03" % (sp["trace_id"], sp["span_id"]))
        # A future version may carry more fields: valid, joined, silent.
        future = "cc-%s-%s-00-what-the-future-will-be-like" % (TRACE_IN, PARENT_IN)
        r = self.traced(peer, self.exit_prog(), server=False, TRACEPARENT=future)
        self.assertEqual((r.rc, r.err), (0, b""))
        sp = self.span_of(peer, r)
        self.assertEqual((sp["trace_id"], sp["parent"]), (TRACE_IN, PARENT_IN))
        self.assertEqual(printed(r)[0], "00-%s-%s-00" % (TRACE_IN, sp["span_id"]))

    def test_root_marker_makes_a_root_span_of_the_given_trace(self):
        peer = self.peer()
        r = self.traced(peer, self.exit_prog(), server=False, TRACEPARENT=TP_IN,
                        TRACESTATE="pyroshim=root,vendor=abc")
        self.assertEqual((r.rc, r.err), (0, b""))
        sp = self.span_of(peer, r)
        self.assertEqual((sp["trace_id"], sp["parent"], sp["trace_state"]),
                         (TRACE_IN, "", "vendor=abc"))
        self.assertEqual(printed(r), ("00-%s-%s-01" % (TRACE_IN, sp["span_id"]), "vendor=abc"))
        # Without the marker a tracestate is passed through untouched.
        r = self.traced(peer, self.exit_prog(), server=False, TRACEPARENT=TP_IN,
                        TRACESTATE="vendor=abc,other=x")
        sp = self.span_of(peer, r)
        self.assertEqual((sp["parent"], sp["trace_state"]), (PARENT_IN, "vendor=abc,other=x"))
        self.assertEqual(printed(r)[1], "vendor=abc,other=x")

    def test_endpoints_headers_and_accepted_switch_values(self):
        peer = self.peer()
        r = self.traced(peer, self.exit_prog(), server=False, PYROSCOPE_TRACE_CORRELATION="yes",
                        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=peer.url + "/custom/v1/traces",
                        OTEL_EXPORTER_OTLP_HEADERS="x-team=a%20b,x-key=k1")
        self.assertEqual((r.rc, r.err), (0, b""))
        r = self.traced(peer, self.exit_prog(), server=False, PYROSCOPE_TRACE_CORRELATION="1",
                        OTEL_EXPORTER_OTLP_ENDPOINT=peer.url + "/base")
        self.assertEqual((r.rc, r.err), (0, b""))
        first, second = peer.records("/v1/traces")
        self.assertEqual(first["path"], "/custom/v1/traces")
        self.assertEqual((first["headers"]["x-team"], first["headers"]["x-key"]), ("a b", "k1"))
        self.assertEqual(second["path"], "/base/v1/traces")

    def test_otel_disabled_sends_no_span_but_keeps_the_tags(self):
        for var, val in (("OTEL_SDK_DISABLED", "true"), ("OTEL_TRACES_EXPORTER", "none")):
            peer = self.peer()
            r = self.traced(peer, self.exit_prog(0, "return", 150), TRACEPARENT=TP_IN, **{var: val})
            self.assertEqual((r.rc, r.err), (0, b""), var)
            (rec,) = peer.ingest("samples")
            self.assertEqual(rec["labels"]["trace_id"], TRACE_IN, var)
            self.assertEqual(rec["labels"]["root_span_id"], printed(r)[0].split("-")[2])
            self.assertEqual(peer.records("/v1/traces"), [], var)

    @unittest.skipUnless(have_go(), "go tool pprof is not installed")
    def test_without_correlation_nothing_changes(self):
        for switch in (None, "false"):
            peer = self.peer()
            extra = {"TRACEPARENT": TP_IN, "TRACESTATE": "vendor=abc"}
            if switch:
                extra["PYROSCOPE_TRACE_CORRELATION"] = switch
            env = clean_env(dict(extra, PYROSCOPE_SERVER_ADDRESS=peer.url,
                                 OTEL_EXPORTER_OTLP_ENDPOINT=peer.url,
                                 PYROSCOPE_APPLICATION_NAME=self.app))
            r = run(self.exit_prog(0, "return", 150), env, timeout=60)
            self.assertEqual((r.rc, r.err), (0, b""))
            self.assertEqual(printed(r), (TP_IN, "vendor=abc"))
            (rec,) = peer.ingest("samples")
            self.assertEqual(rec["query"]["name"], self.app + "{}")
            # Only the process's label (group.h): no span_id, no trace_id.
            self.assertEqual(set(pprof_tags(rec["payload"])), {"pid"})
            self.assertEqual(peer.records("/v1/traces"), [])
        r = run(self.exit_prog(), clean_env({"PYROSCOPE_OUTPUT_DIR": self.out}), timeout=60)
        self.assertEqual(printed(r), ("(unset)", "(unset)"))


if __name__ == "__main__":
    unittest.main()

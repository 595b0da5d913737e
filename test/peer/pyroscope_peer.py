#!/usr/bin/env python3
"""pyroscope_peer.py -- a loopback stand-in for a Grafana Pyroscope server.

It applies Pyroscope's /ingest rules (grafana/pyroscope,
pkg/ingester/pyroscope/ingest_handler.go and pkg/og/storage/segment/key.go)
and its push API's (POST /push.v1.PusherService/Push, the Connect protocol:
api/push/v1/push.proto, pkg/validation/validate.go ValidateLabels)
strictly enough that a client mistake the real server would reject is
rejected here too, and records everything it accepts so tests can compare
what arrived with what was sent.  It also stores OTLP/HTTP trace exports
(POST .../v1/traces) and can misbehave on demand (status codes, hangs,
closed connections, connections cut mid-body, non-HTTP answers, slow
answers).  With --tls-cert and --tls-key it speaks HTTPS only.

Standard library only.  Binds 127.0.0.1; never outlives --max-seconds.

A push request is recorded like an /ingest one, with the fields the tests
compare derived from what the push API carries: app_name and labels from
the series' labels (service_name, the rest), from_ns/until_ns from the
pprof's time_nanos and duration_nanos, units "samples" for process_cpu,
"bytes" for memory and "lock_samples" for block and mutex; `metric` is the
series' __name__ (for /ingest pprof, the name the server derives from the
sample types: metric_name).  In rejected.log its path is written with those as an
/ingest-style query (name, from, until, units), so one log serves both
APIs; to name an attempt, --cut reads a push body whole before the reset.

Output in --dir D, for every accepted request numbered NNNN from 0001:
  NNNN.json    metadata (method, path, query, app name, labels, headers, ...)
  NNNN.pb.gz / NNNN.pb / NNNN.folded / NNNN.bin   the payload as received
The payload file is written before the .json, and both atomically, so a
reader that sees NNNN.json sees everything.  Rejections and injected faults
go to D/rejected.log, one line each: "<time> <status> <path> <reason>".
"""
import argparse
import base64
import binascii
import email.parser
import email.policy
import gzip
import json
import os
import re
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_LABELS = 30            # per series, counting __name__ and service_name
MAX_LABEL_NAME = 1024
MAX_LABEL_VALUE = 2048
MAX_PROFILE = 4 << 20      # uncompressed pprof
MAX_SAMPLES = 16000
TIME_UNITS = {10: 10**9, 13: 10**6, 16: 10**3, 19: 1}  # digits -> ns factor
APP_CHARS = re.compile(r'^[A-Za-z0-9_./-]+$')
KEY_CHARS = re.compile(r'^[A-Za-z0-9_.]+$')
PUSH_PATH = '/push.v1.PusherService/Push'
PROM_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')    # after '.' -> '_'
PUSH_UNITS = {'process_cpu': 'samples', 'memory': 'bytes', 'block': 'lock_samples',
              'mutex': 'lock_samples'}
OTHER_FORMATS = ('trie', 'tree', 'lines', 'jfr', 'speedscope')


class Reject(Exception):
    """A request the real server would refuse: HTTP status and reason."""

    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def parse_name(name):
    """Split APP{k=v,...} as Pyroscope's segment key parser does.

    A value ends at ',' or '}' (no escaping); names and values are
    trimmed.  Stricter than the server in one way: an unterminated label
    set is an error here, where the server silently drops the last label.
    Returns (app, labels, dropped) where dropped lists '__' names."""
    app, labels, dropped = None, {}, []
    state, key, val = 'name', '', ''
    for ch in name:
        if state == 'name':
            if ch == '{':
                app, state = name[:name.index('{')].strip(), 'key'
        elif state == 'key':
            if ch == '}':
                state = 'done'
            elif ch == '=':
                state, val = 'value', ''
            else:
                key += ch
        elif state == 'value':
            if ch in ',}':
                add_label(labels, dropped, key.strip(), val.strip())
                state, key = ('key' if ch == ',' else 'done'), ''
            else:
                val += ch
    if state == 'name':
        app = name.strip()
    elif state != 'done':
        raise Reject(400, 'invalid_argument', 'name: unterminated label set')
    if not app or not APP_CHARS.match(app):
        raise Reject(400, 'invalid_argument', 'name: invalid app name %r' % app)
    return app, labels, dropped


def add_label(labels, dropped, key, val):
    if key != '__name__' and not KEY_CHARS.match(key):
        raise Reject(400, 'invalid_argument', 'name: invalid label name %r' % key)
    if key in labels or key in dropped:
        raise Reject(400, 'invalid_argument', 'name: duplicate label %r' % key)
    if key.startswith('__'):
        dropped.append(key)
        return
    if len(key) > MAX_LABEL_NAME:
        raise Reject(400, 'invalid_argument', 'label name too long: %r' % key[:64])
    if len(val) > MAX_LABEL_VALUE:
        raise Reject(400, 'invalid_argument', 'label value too long: %r' % key)
    labels[key] = val


def parse_time(q, name, window):
    """from/until: all digits; the length gives the unit.  Returns ns."""
    v = q.get(name)
    if v is None:
        return None
    if not v.isdigit() or len(v) not in TIME_UNITS:
        raise Reject(400, 'invalid_argument', '%s: bad timestamp %r' % (name, v))
    ns = int(v) * TIME_UNITS[len(v)]
    now = time.time_ns()
    if window and not now - 3600 * 10**9 <= ns <= now + 600 * 10**9:
        raise Reject(400, 'invalid_argument', '%s: outside now-1h..now+10m' % name)
    return ns


def varint(b, i):
    v, shift = 0, 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError('truncated varint')
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def check_pprof(raw):
    """Gunzip if needed, then walk the top-level protobuf fields of a
    Profile: well-formed wire format, string_table[0] == "", at least one
    sample_type, size and sample-count limits.  Returns a summary dict."""
    gz = raw[:2] == b'\x1f\x8b'
    if not raw:
        raise Reject(422, 'invalid_argument', 'empty profile')
    try:
        data = gzip.decompress(raw) if gz else raw
    except (OSError, EOFError, zlib.error) as e:
        raise Reject(422, 'invalid_argument', 'bad gzip: %s' % e)
    if len(data) > MAX_PROFILE:
        raise Reject(413, 'invalid_argument', 'profile too large: %d' % len(data))
    try:
        fields = pb_fields(data)
    except ValueError as e:
        raise Reject(422, 'invalid_argument', 'malformed pprof: %s' % e)
    counts = {}
    for field, _, _ in fields:
        counts[field] = counts.get(field, 0) + 1
    strings = [v for f, w, v in fields if f == 6 and w == 2]
    if not strings or strings[0] != b'':
        raise Reject(422, 'invalid_argument', 'string_table[0] must be ""')
    if not counts.get(1):
        raise Reject(422, 'invalid_argument', 'no sample_type')
    if counts.get(2, 0) > MAX_SAMPLES:
        raise Reject(422, 'invalid_argument', 'too many samples')
    try:
        for s in strings:
            s.decode('utf-8')
    except UnicodeDecodeError:
        raise Reject(422, 'invalid_argument', 'string_table is not UTF-8')
    types = []
    for f, w, v in fields:
        if f == 1 and w == 2:
            t = dict((tf, tv) for tf, tw, tv in pb_fields(v) if tw == 0).get(1, 0)
            types.append(strings[t].decode() if t < len(strings) else '')
    return {'gzipped': gz, 'pprof_len': len(data), 'samples': counts.get(2, 0),
            'strings': len(strings), 'sample_types': types}


def metric_name(types, config):
    """The __name__ the server gives an /ingest pprof (grafana/pyroscope,
    pkg/og/convert/pprof/profile.go, metricName): from each sample type, or
    its display-name in sample_type_config, the first that contains cpu,
    alloc_/inuse_, mutex_, block_ or goroutines; else the last type."""
    if 'wall' in types:
        return 'wall'
    st = ''
    for st in types:
        st = ((config or {}).get(st) or {}).get('display-name') or st
        if 'cpu' in st:
            return 'process_cpu'
        if 'alloc_' in st or 'inuse_' in st or st in ('space', 'objects'):
            return 'memory'
        for m in ('mutex', 'block'):
            if m + '_' in st:
                return m
        if 'goroutines' in st:
            return 'goroutines'
    return st


def check_folded(body):
    """Folded text: one 'frame;frame;leaf COUNT' per line."""
    try:
        text = body.decode('utf-8')
    except UnicodeDecodeError:
        raise Reject(422, 'invalid_argument', 'folded profile is not UTF-8')
    lines, total = 0, 0
    for n, line in enumerate(text.split('\n'), 1):
        if not line.strip():
            continue
        stack, _, count = line.rstrip('\r').rpartition(' ')
        if not stack or not count.isdigit():
            raise Reject(422, 'invalid_argument', 'folded line %d malformed' % n)
        lines, total = lines + 1, total + int(count)
    if lines == 0:
        raise Reject(422, 'invalid_argument', 'empty profile')
    return {'folded_lines': lines, 'folded_total': total}


def parse_multipart(ctype, body):
    """Fields of a multipart/form-data body: {name: bytes}."""
    if 'boundary=' not in ctype:
        raise Reject(400, 'invalid_argument', 'multipart without boundary')
    head = ('Content-Type: %s\r\nMIME-Version: 1.0\r\n\r\n' % ctype).encode()
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not msg.is_multipart():
        raise Reject(400, 'invalid_argument', 'malformed multipart body')
    fields = {}
    for part in msg.iter_parts():
        name = part.get_param('name', header='content-disposition')
        if name:
            fields[name] = part.get_payload(decode=True) or b''
    return fields


def pb_fields(data):
    """Top-level fields of a protobuf message: [(field, wire, value)],
    value an int (varint, fixed) or bytes (length-delimited)."""
    out, i = [], 0
    while i < len(data):
        key, i = varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(data, i)
        elif wire == 1:
            v, i = int.from_bytes(data[i:i + 8], 'little'), i + 8
        elif wire == 5:
            v, i = int.from_bytes(data[i:i + 4], 'little'), i + 4
        elif wire == 2:
            n, i = varint(data, i)
            v, i = data[i:i + n], i + n
        else:
            raise ValueError('wire type %d' % wire)
        if i > len(data):
            raise ValueError('field overruns the message')
        out.append((field, wire, v))
    return out


def parse_push(body):
    """PushRequest -> [(labels as [(name, value)], [raw_profile bytes])]."""
    series = []
    try:
        for f, w, v in pb_fields(body):
            if f != 1 or w != 2:
                continue
            labels, samples = [], []
            for f2, w2, v2 in pb_fields(v):
                if f2 == 1 and w2 == 2:
                    kv = {f3: v3 for f3, w3, v3 in pb_fields(v2) if w3 == 2}
                    labels.append((kv.get(1, b'').decode('utf-8'), kv.get(2, b'').decode('utf-8')))
                elif f2 == 2 and w2 == 2:
                    kv = {f3: v3 for f3, w3, v3 in pb_fields(v2) if w3 == 2}
                    samples.append(kv.get(1, b''))
            series.append((labels, samples))
    except (ValueError, UnicodeDecodeError) as e:
        raise Reject(400, 'invalid_argument', 'malformed PushRequest: %s' % e)
    return series


def check_push_labels(labels):
    """ValidateLabels' rules: sorted by the server, then a valid __name__
    and service_name, at most 30 names, names valid once '.' is '_', no
    duplicate.  Returns {name: value}."""
    if not labels:
        raise Reject(400, 'invalid_argument', 'at least one label pair is required')
    if len(labels) > MAX_LABELS:
        raise Reject(400, 'invalid_argument', 'max-label-names-per-series: %d > %d'
                     % (len(labels), MAX_LABELS))
    out = {}
    for name, value in sorted(labels):
        clean = name.replace('.', '_')
        if not PROM_NAME.match(clean):
            raise Reject(400, 'invalid_argument', 'invalid label name %r' % name)
        if clean in out:
            raise Reject(400, 'invalid_argument', 'duplicate label name %r' % name)
        if len(name) > MAX_LABEL_NAME or len(value) > MAX_LABEL_VALUE:
            raise Reject(400, 'invalid_argument', 'label too long: %r' % name[:64])
        out[clean] = value
    if not PROM_NAME.match(out.get('__name__', '')):
        raise Reject(400, 'invalid_argument', 'invalid metric name')
    if not out.get('service_name'):
        raise Reject(400, 'invalid_argument', 'service name is not provided')
    return out


def pprof_times(raw):
    """(time_nanos, duration_nanos) of a pprof, gzipped or not."""
    data = gzip.decompress(raw) if raw[:2] == b'\x1f\x8b' else raw
    t = d = 0
    for f, w, v in pb_fields(data):
        if f == 9 and w == 0:
            t = v
        elif f == 10 and w == 0:
            d = v
    return t, d


def push_key(body):
    """The /ingest-style query that names a push attempt in rejected.log."""
    try:
        labels, samples = parse_push(body)[0]
        ls = dict(labels)
        t, d = pprof_times(samples[0])
    except (Reject, IndexError, ValueError, OSError, EOFError, zlib.error):
        return ''
    tags = ','.join('%s=%s' % kv for kv in sorted(ls.items())
                    if kv[0] not in ('__name__', '__delta__', 'service_name', 'pyroscope_spy'))
    return '?' + urllib.parse.urlencode({
        'name': '%s{%s}' % (ls.get('service_name', ''), tags), 'from': '%019d' % t,
        'until': '%019d' % (t + d), 'units': PUSH_UNITS.get(ls.get('__name__'), '')})


class Peer:
    """State shared by the handler threads; every field under `lock`."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.seq = 0          # accepted requests so far
        self.faults = 0       # requests answered with an injected fault
        self.stop = threading.Event()

    def take_fault(self):
        a = self.args
        if not (a.status or a.hang or a.close or a.garbage or a.cut is not None):
            return False
        with self.lock:
            if a.fail_first is not None and self.faults >= a.fail_first:
                return False
            self.faults += 1
            return True

    def next_seq(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def log_reject(self, status, path, reason):
        with self.lock:
            with open(os.path.join(self.args.dir, 'rejected.log'), 'a') as f:
                f.write('%.3f %s %s %s\n' % (time.time(), status, path, reason))

    def save(self, rec, ext, payload):
        n = self.next_seq()
        base = os.path.join(self.args.dir, '%04d' % n)
        rec['seq'] = n
        if ext:
            rec['payload_file'] = os.path.basename(base + ext)
            write_atomic(base + ext, payload)
        write_atomic(base + '.json', json.dumps(rec, indent=1, sort_keys=True).encode())
        return n


def write_atomic(path, data):
    tmp = path + '.tmp'
    with open(tmp, 'wb') as f:
        f.write(data)
    os.replace(tmp, path)


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    server_version = 'pyroscope_peer/1'
    peer = None   # set by main()

    def log_message(self, fmt, *args):
        pass      # silent: tests parse nothing from the peer's stderr

    def handle(self):
        if self.peer.args.tls_cert and not self.tls_handshake():
            return
        self.requests_seen = 0
        super().handle()
        if self.peer.args.tls_cert and self.requests_seen == 0:
            # What a client that checks the host name after the handshake
            # (libcurl with OpenSSL) does with a certificate for another name.
            self.peer.log_reject(0, '-', 'tls connection closed before any request')

    def parse_request(self):
        self.requests_seen = getattr(self, 'requests_seen', 0) + 1
        return super().parse_request()

    def tls_handshake(self):
        """Complete the TLS handshake in this handler's thread (never in
        the accept loop), within 10 s.  A client that refuses the
        certificate (or any other failure) is logged as status 0 with the
        reason, e.g. "tls handshake failed: ... alert unknown ca"."""
        try:
            self.connection.settimeout(10)
            self.connection.do_handshake()
            self.connection.settimeout(None)
            return True
        except (ssl.SSLError, OSError) as e:
            reason = getattr(e, 'reason', None) or str(e) or type(e).__name__
            self.peer.log_reject(0, '-', 'tls handshake failed: %s' % reason)
            self.close_connection = True
            return False

    def do_GET(self):
        self.answer(404, {'code': 'not_found', 'message': 'POST only'})

    def do_POST(self):
        self.log_path = None
        path = urllib.parse.urlsplit(self.path).path
        push = path.endswith(PUSH_PATH)
        if self.peer.args.cut is not None and self.peer.take_fault():
            if push:
                self.log_path = self.path + push_key(self.read_body() or b'')
                self.cut(0)
            else:
                self.cut(self.peer.args.cut)
            return
        body = self.read_body()
        if body is None:
            return
        if push:
            self.log_path = self.path + push_key(body)
        if self.peer.args.slow:
            self.peer.stop.wait(self.peer.args.slow)
        if self.peer.take_fault():
            self.fault()
            return
        try:
            self.check_auth()
            if push:
                rec, ext, payload = self.push(body)
            elif path.endswith('/ingest'):
                rec, ext, payload = self.ingest(body)
            elif path.endswith('/v1/traces'):
                rec, ext, payload = self.traces(body)
            else:
                raise Reject(404, 'not_found', 'no handler for %s' % path)
        except Reject as r:
            self.peer.log_reject(r.status, self.logged_path(), r.message)
            self.answer(r.status, {'code': r.code, 'message': r.message})
            return
        self.peer.save(self.record(rec, body), ext, payload)
        if path.endswith('/v1/traces'):
            self.answer(200, b'', 'application/x-protobuf')
        elif push:
            self.answer(200, b'', 'application/proto')     # an empty PushResponse
        else:
            self.answer(200, b'')

    def read_body(self):
        """The request body, or None after answering an error."""
        if 'chunked' in self.headers.get('Transfer-Encoding', '').lower():
            return self.read_chunked()
        try:
            n = int(self.headers.get('Content-Length', '0'))
        except ValueError:
            n = -1
        if n < 0 or n > self.peer.args.max_body:
            self.close_connection = True
            self.answer(413, {'code': 'too_large', 'message': 'body too large'})
            return None
        return self.rfile.read(n)

    def read_chunked(self):
        out = bytearray()
        while True:
            size = int(self.rfile.readline().split(b';')[0].strip() or b'0', 16)
            if size == 0:
                while self.rfile.readline().strip():
                    pass
                return bytes(out)
            out += self.rfile.read(size)
            self.rfile.readline()
            if len(out) > self.peer.args.max_body:
                self.close_connection = True
                self.answer(413, {'code': 'too_large', 'message': 'body too large'})
                return None

    def fault(self):
        a = self.peer.args
        self.close_connection = True
        self.peer.log_reject(a.status or 0, self.logged_path(), 'injected fault')
        if a.hang:
            self.peer.stop.wait()       # until the peer exits
            return
        if a.close:
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if a.garbage:
            self.wfile.write(b'\x00\xffSSH-2.0-not-http\r\n\x7f\x01garbage\r\n\r\n')
            return
        body = a.body.encode() if a.body is not None else json.dumps(
            {'code': 'injected', 'message': 'pyroscope_peer injected status %d'
             % a.status}).encode()
        extra = [('Retry-After', a.retry_after)] if a.retry_after else []
        self.answer(a.status, body, 'application/json' if a.body is None
                    else 'text/plain; charset=utf-8', extra)

    def cut(self, n):
        """A server going away mid-upload: read the headers and at most n
        bytes of the body, then reset the connection (RST, no answer)."""
        self.close_connection = True
        self.peer.log_reject(0, self.logged_path(), 'injected fault: cut after %d body bytes' % n)
        try:
            want = int(self.headers.get('Content-Length', '0'))
        except ValueError:
            want = 0
        if min(n, want) > 0:
            self.rfile.read(min(n, want))
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                   struct.pack('ii', 1, 0))
        self.rfile.close()              # the last reference but ours:
        self.connection.close()         # this close sends the RST

    def logged_path(self):
        return getattr(self, 'log_path', None) or self.path

    def push(self, body):
        """The push API (Connect, unary): application/proto, one or more
        series, each with valid labels and pprof samples.  Recorded as the
        first series' first sample (the shim sends one of each)."""
        ctype = self.headers.get('Content-Type', '')
        if ctype.split(';')[0].strip() != 'application/proto':
            raise Reject(415, 'invalid_argument', 'unsupported content type %r' % ctype)
        series = parse_push(body)
        if not series:
            raise Reject(400, 'invalid_argument', 'no series')
        recs = []
        for labels, samples in series:
            ls = check_push_labels(labels)
            if not samples:
                raise Reject(400, 'invalid_argument', 'series without samples')
            for raw in samples:
                recs.append(check_pprof(raw))
        labels, samples = series[0]
        ls = dict(labels)
        t, d = pprof_times(samples[0])
        rec = dict(recs[0])
        rec.update({'kind': 'push', 'app_name': ls['service_name'], 'push_labels': ls,
                    'labels': {k: v for k, v in ls.items() if not k.startswith('__')
                               and k not in ('service_name', 'pyroscope_spy')},
                    'series': len(series), 'samples_per_series': [len(x[1]) for x in series],
                    'from_ns': t, 'until_ns': t + d, 'units': PUSH_UNITS.get(ls['__name__']),
                    'metric': ls['__name__'],
                    'connect_protocol_version': self.headers.get('Connect-Protocol-Version')})
        return rec, '.pb.gz' if rec['gzipped'] else '.pb', samples[0]

    def check_auth(self):
        a = self.peer.args
        auth = self.headers.get('Authorization', '')
        if a.require_basic:
            try:
                got = base64.b64decode(auth[6:], validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                got = None
            if not auth.startswith('Basic ') or got != a.require_basic:
                raise Reject(401, 'unauthenticated', 'basic auth required')
        if a.require_bearer and auth != 'Bearer ' + a.require_bearer:
            raise Reject(401, 'unauthenticated', 'bearer token required')
        if a.require_tenant and self.headers.get('X-Scope-OrgID') != a.require_tenant:
            raise Reject(401, 'unauthenticated', 'no org id')

    def query(self):
        qs = urllib.parse.urlsplit(self.path).query
        return {k: v[0] for k, v in
                urllib.parse.parse_qs(qs, keep_blank_values=True).items()}

    def ingest(self, body):
        q = self.query()
        app, labels, dropped = parse_name(q.get('name', ''))
        series = dict(labels, __name__=app)
        series.setdefault('service_name', app)
        if q.get('spyName'):
            series['pyroscope_spy'] = q['spyName']
        if len(series) > MAX_LABELS:
            raise Reject(400, 'invalid_argument',
                         'max-label-names-per-series: %d > %d' % (len(series), MAX_LABELS))
        rec = {'app_name': app, 'labels': labels, 'dropped_labels': dropped,
               'from_ns': parse_time(q, 'from', self.peer.args.window),
               'until_ns': parse_time(q, 'until', self.peer.args.window),
               'spy_name': q.get('spyName'), 'sample_rate': q.get('sampleRate'),
               'units': q.get('units'), 'aggregation_type': q.get('aggregationType'),
               'format': q.get('format'),
               'profile_type': app.rsplit('.', 1)[-1] if '.' in app else None}
        rec['kind'], ext, payload = self.ingest_payload(q.get('format'), body, rec)
        return rec, ext, payload

    def ingest_payload(self, fmt, body, rec):
        """Format dispatch in the server's order: format=pprof and the other
        named formats win over a multipart Content-Type."""
        ctype = self.headers.get('Content-Type', '')
        if fmt == 'pprof':
            rec.update(check_pprof(body))
            rec['metric'] = metric_name(rec['sample_types'], None)
            return 'pprof', '.pb.gz' if rec['gzipped'] else '.pb', body
        if fmt in OTHER_FORMATS:
            if not body:
                raise Reject(422, 'invalid_argument', 'empty profile')
            return fmt, '.bin', body
        if 'multipart/form-data' in ctype:
            fields = parse_multipart(ctype, body)
            if 'prev_profile' in fields:
                raise Reject(422, 'invalid_argument', 'prev_profile is not supported')
            if not fields.get('profile'):
                raise Reject(422, 'invalid_argument', 'empty profile field')
            rec['fields'] = sorted(fields)
            if 'sample_type_config' in fields:
                try:
                    rec['sample_type_config'] = json.loads(fields['sample_type_config'])
                except ValueError:
                    raise Reject(422, 'invalid_argument', 'bad sample_type_config')
            prof = fields['profile']
            rec.update(check_pprof(prof))
            rec['metric'] = metric_name(rec['sample_types'], rec.get('sample_type_config'))
            return 'pprof-multipart', '.pb.gz' if rec['gzipped'] else '.pb', prof
        rec.update(check_folded(body))
        return 'folded', '.folded', body

    def traces(self, body):
        rec = {'kind': 'otlp-traces',
               'content_encoding': self.headers.get('Content-Encoding')}
        return rec, '.pb', body

    def record(self, rec, body):
        hdrs = {}
        for k, v in self.headers.items():
            hdrs[k] = v if k not in hdrs else hdrs[k] + ', ' + v
        rec.update({'method': self.command, 'path': urllib.parse.urlsplit(self.path).path,
                    'query': self.query(), 'headers': hdrs,
                    'content_type': self.headers.get('Content-Type'),
                    'body_len': len(body), 'received_at': time.time()})
        return rec

    def answer(self, status, body, ctype='application/json', extra=()):
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        if self.close_connection:
            self.send_header('Connection', 'close')
        self.end_headers()
        self.wfile.write(body)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--dir', required=True, help='where requests are saved')
    p.add_argument('--port', type=int, default=0)
    p.add_argument('--port-file', help='written atomically once listening')
    p.add_argument('--max-seconds', type=float, default=300)
    p.add_argument('--max-body', type=int, default=64 << 20)
    p.add_argument('--window', action='store_true',
                   help='reject from/until outside now-1h..now+10m')
    p.add_argument('--status', type=int, help='answer this status (fault)')
    p.add_argument('--fail-first', type=int, help='fault only the first N requests')
    p.add_argument('--retry-after', help='Retry-After value on faulted answers')
    p.add_argument('--body', help='error body for --status (default JSON)')
    p.add_argument('--hang', action='store_true', help='read, never answer')
    p.add_argument('--close', action='store_true', help='read, close, no answer')
    p.add_argument('--garbage', action='store_true', help='answer non-HTTP bytes')
    p.add_argument('--cut', type=int, metavar='BYTES',
                   help='read at most BYTES of the body, then reset the connection')
    p.add_argument('--slow', type=float, metavar='SECONDS',
                   help='answer every request SECONDS late (not a fault)')
    p.add_argument('--require-basic', metavar='USER:PASS')
    p.add_argument('--require-bearer', metavar='TOKEN')
    p.add_argument('--require-tenant', metavar='ID')
    p.add_argument('--tls-cert', metavar='PEM', help='serve HTTPS with this certificate')
    p.add_argument('--tls-key', metavar='PEM', help='private key of --tls-cert')
    args = p.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error('--tls-cert and --tls-key go together')
    return args


def main(argv):
    args = parse_args(argv)
    os.makedirs(args.dir, exist_ok=True)
    Handler.peer = Peer(args)
    server = ThreadingHTTPServer(('127.0.0.1', args.port), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        # The handshake happens in the handler thread (Handler.handle), so
        # a client that stalls or refuses the certificate blocks no one.
        server.socket = ctx.wrap_socket(server.socket, server_side=True,
                                        do_handshake_on_connect=False)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if args.port_file:
        write_atomic(args.port_file, b'%d\n' % server.server_address[1])
    done.wait(args.max_seconds)
    Handler.peer.stop.set()
    server.shutdown()
    server.server_close()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

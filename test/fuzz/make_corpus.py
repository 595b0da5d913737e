#!/usr/bin/env python3
"""Write the seed corpora of test/fuzz/corpus/<target>/ (valid and invalid
examples of each input, in the byte layout each target's header comment
describes).  Run it again after changing a layout; files it did not write
(e.g. minimised crash inputs kept as regressions) are left alone.

    python3 test/fuzz/make_corpus.py
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
TP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

SEEDS = {
    "traceparent": [
        TP, TP.replace("-01", "-00"), "01" + TP[2:] + "-extra", "01" + TP[2:],
        "ff" + TP[2:], TP.upper(), TP + "x", TP[:-1],
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
        "a=1, b=2 ,\tc=3,,", "a=1,a=2", "t@s=v", "1t@s=v", "t@S=v",
        "k=" + "v" * 256, "k=" + "v" * 257, "k=v ", "k= v",
        ",".join("k%d=v" % i for i in range(33)),
    ],
    "otlp_headers": [
        b"\x10api-key=secret,x-org=acme", b"\x10a=b%20c, d = e ,,",
        b"\x10bad name=x,ok=%41%4a", b"\x10cr=%0d%0a,tab=a%09b,bad=%zz",
        b"\x02a=1,b=2,c=3", b"\x90a=1,b=2", b"\x10=novalue,noeq,x=",
    ],
    "config_values": [
        "10s", "500ms", "1m", "2h", "15", "0s", "999999999999999h",
        "1000000000000000", "512k", "512KiB", "8M", "8MiB", "1G", "1GiB",
        "16777216G", "-1", "1.5s", " 1s", "error", "WARN", "warning", "Info",
        "debug", "true", "FALSE", "yes", "off", "1", "0", "maybe",
        struct.pack("<QQ", 1, 1000) + b"100",
        struct.pack("<QQ", 0, 2**64 - 1) + b"18446744073709551615",
        struct.pack("<QQ", 0, 2**64 - 1) + b"9999999999999999999",
        struct.pack("<QQ", 5, 3) + b"4",
    ],
    "tags": [
        b"\x10env=dev,region=eu-west-1\x00trace_id\x00abc\x00my-app",
        b"\x03 env = dev , ,k2=v 2,\x00env\x00other\x00 app name ",
        b"\x01__name__=x,bad-name=y,v={x},w=a=b,dup=1,dup=2\x00k\x00v\x00\xc3\xa9t\xc3\xa9",
        b"\x00" + ",".join("k%d=v" % i for i in range(32)).encode() + b"\x00k99\x00v\x00a",
        b"\x07x=\xff\xfe,y=\xe2\x82\xac,z=a\nb\x00\x00\x00",
        b"\x05k=" + b"v" * 600 + b"\x00" + b"k" * 200 + b"\x00v\x00" + b"a" * 300,
    ],
    "headers": [
        '{"X-Foo":"bar","X-Baz":"q"}', ' { "Authorization" : "Bearer t" } ',
        '{}', '', '{"a":"\\u00e9\\ud83d\\ude00\\n"}', '{"a":"\\ud83d"}',
        '{"X":"a\\r\\nInjected: 1"}', '{"Content-Type":"x","x":"1","X":"2"}',
        '{"bad name":"v","ok":"  "}', '{"a":1}', '{"a":{"b":"c"}}', '["a"]',
        '{"a":"b"} x', '{"a":"b",}', '{"a":"\\/\\b\\f\\t\\"\\\\"}',
        "{" + ",".join('"h%d":"v"' % i for i in range(40)) + "}",
    ],
}


def ingest_seed(lens, times, server, name):
    return bytes(lens) + struct.pack("<QQ", *times) + server + b"\0" + name


T0 = 1700000000000000000
SEEDS["ingest_url"] = [
    ingest_seed((255, 255, 255), (T0, T0 + 10**10), b"http://localhost:4040",
                b"app{env=dev}"),
    ingest_seed((255, 255, 255), (T0, 0), b"https://user:p%40ss@host.example/pyroscope/",
                b"app.cpu{}"),
    ingest_seed((255, 255, 255), (0, 0), b"HTTPS://[::1]:443", b"a b&c=d"),
    ingest_seed((10, 4, 4), (T0, T0), b"http://u:p@averylonghostname:1",
                b"\xe2\x82\xac"),
    ingest_seed((255, 255, 255), (T0 + 1, T0), b"ftp://host", b"x"),
    ingest_seed((255, 255, 255), (2**64 - 1, 0), b"http://host:0", b"x"),
    ingest_seed((255, 255, 255), (0, 0), b"http://host:65536/p?q#f", b""),
    ingest_seed((255, 255, 255), (0, 0), b"http://%zz@host", b"n"),
    ingest_seed((255, 255, 255), (0, 0), b"http://a@b@host/x@y//", b"n"),
    ingest_seed((255, 255, 255), (0, 0), b"http:///path", b"n"),
]

# span: flags byte (bit i: field i NULL), then TRACEPARENT, TRACESTATE,
# application name, span-name override.
SEEDS["span"] = [
    b"\x00" + TP.encode() + b"\0rojo=1,congo=2\0com.acme.gen\0",
    b"\x00" + TP.encode() + b"\0bad state=\0gen\0custom",
    b"\x03\0\0app\0",
    b"\x00garbage\0a=1\0a.b.\0",
    b"\x0c" + TP.encode() + b"\0\0\0",
    b"\x00\0\0" + "é".encode() * 100 + b"\0",
    b"\x00\0\0x\0" + "€".encode() * 60,
]

# config_env: executable path, then NAME=value records.
SEEDS["config_env"] = [
    b"/usr/bin/prog\0PYROSCOPE_SAMPLE_RATE=250\0PYROSCOPE_UPLOAD_INTERVAL=500ms\0"
    b"PYROSCOPE_LOG_LEVEL=debug\0PYROSCOPE_ENABLED=false",
    b"/bin/x\0PYROSCOPE_SAMPLE_RATE=0\0PYROSCOPE_STACK_MEMORY=1k\0"
    b"PYROSCOPE_FLUSH_TIMEOUT=1h\0PYROSCOPE_ALLOC_SAMPLE_BYTES=2T",
    b"\0PYROSCOPE_APPLICATION_NAME=a/b\x01c\0OTEL_SERVICE_NAME=svc",
    b"/p\0PYROSCOPE_OUTPUT_DIR=" + b"d" * 5000 + b"\0PYROSCOPE_SERVER_ADDRESS=http://h:4040",
    b"/\0OTEL_SERVICE_NAME=\0PYROSCOPE_APPLICATION_NAME=",
    b"relative\0PYROSCOPE_ALLOC_SAMPLE_BYTES=512KiB\0PYROSCOPE_ALLOC_SAMPLE_BYTES=1",
]


def gopclntab_seed(magic=0xfffffff0, nfunc=2):
    """A Go 1.18+ function table (shim/gopclntab.h): header, names, pc-sp
    tables, function table, _func records (as test/check_gopclntab.c)."""
    names, pctab, functab = 72, 96, 128
    funcs = functab + (2 * nfunc + 1) * 4
    size = funcs + nfunc * 40
    b = bytearray(size)
    struct.pack_into("<IBBBBQQQQQQQQ", b, 0, magic, 0, 0, 1, 8, nfunc, 0, 0x401000,
                     names, 0, 0, pctab, functab)
    b[names:names + 22] = b"main.framed\0main.leaf\0"
    b[pctab + 1:pctab + 8] = bytes([2, 4, 48, 0x18, 47, 4, 0])
    b[pctab + 10:pctab + 13] = bytes([2, 0x10, 0])
    for i in range(nfunc):
        struct.pack_into("<II", b, functab + 8 * i, 0x20 * i, funcs - functab + 40 * i)
        struct.pack_into("<IiiII", b, funcs + 40 * i, 0x20 * i, 12 if i % 2 else 0, 0, 0,
                         10 if i % 2 else 1)
    struct.pack_into("<I", b, functab + 8 * nfunc, 0x20 * nfunc)
    return bytes(b)


# gopclntab: the table's bytes.
SEEDS["gopclntab"] = [
    gopclntab_seed(), gopclntab_seed(0xfffffff1), gopclntab_seed(nfunc=5),
    gopclntab_seed()[:140], gopclntab_seed(0xfffffffa),
]


M64 = 2**64 - 1
P1, P2, P3, P4, P5 = (11400714785074694791, 14029467366897019727, 1609587929392839161,
                      9650029242287828579, 2870177450012600261)


def xxh64(data, seed=0):
    """XXH64, as common/hash.h's ps_hash_xxh64 (xxHash's specification)."""
    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & M64

    def rnd(acc, x):
        return rotl((acc + x * P2) & M64, 31) * P1 & M64

    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while n - i >= 32:
            v = [rnd(v[k], struct.unpack_from("<Q", data, i + 8 * k)[0]) for k in range(4)]
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for x in v:
            h = ((h ^ rnd(0, x)) * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while n - i >= 8:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", data, i)[0]), 27) * P1 + P4) & M64
        i += 8
    if n - i >= 4:
        h = (rotl(h ^ (struct.unpack_from("<I", data, i)[0] * P1 & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = rotl(h ^ (data[i] * P5 & M64), 11) * P1 & M64
        i += 1
    h ^= h >> 33
    h = h * P2 & M64
    h ^= h >> 29
    h = h * P3 & M64
    return h ^ (h >> 32)


assert xxh64(b"") == 0xef46db3751d8e999 and xxh64(b"abc") == 0x44bc2cf5ad770999


def symcache_seed(ranges, bad_sum=False):
    """A symbol cache file (symbolize/symcache.c) of build ID 12345678
    0102...10, after the target's control byte 0 (taken as it is).
    ranges: [(lo, hi, [(name, linkage or None, file, line, decl)])]."""
    pool, offs, ents, frames = bytearray(), {}, bytearray(), bytearray()

    def s(x):
        if x not in offs:
            offs[x] = len(pool)
            pool.extend(x.encode() + b"\0")
        return offs[x]

    nframe = 0
    for lo, hi, chain in ranges:
        ents += struct.pack("<QQII", lo, hi, nframe, len(chain))
        for name, linkage, file, line, decl in chain:
            frames += struct.pack("<IIIii", s(name), 0xffffffff if linkage is None else s(linkage),
                                  s(file), line, decl)
            nframe += 1
    ident = bytes([0x12, 0x34, 0x56, 0x78] + list(range(1, 17)))
    # struct head: magic, byte order, build ID (64 bytes), counts, flags,
    # then the sum: XXH64 of the header so far, then of each array, each
    # seeded with the hash so far (body_sum).
    head = b"PYROSYM\3" + struct.pack("<II", 0x01020304, 20) + ident + bytes(44) + \
        struct.pack("<IIII", len(ranges), nframe, len(pool), 0)
    s = xxh64(bytes(pool), xxh64(bytes(frames), xxh64(bytes(ents), xxh64(head))))
    return b"\0" + head + struct.pack("<Q", s ^ (1 if bad_sum else 0)) + bytes(ents + frames + pool)


# symcache: a control byte (bit 0: fix the build ID and sum up), the file.
SEEDS["symcache"] = [
    symcache_seed([(0x1000, 0x1010, [("inner", None, "/a.h", 12, 10),
                                     ("outer", "_Z5outerv", "/a.c", 40, 33)]),
                   (0x2000, 0x2001, [])]),
    b"\1" + symcache_seed([(0x10, 0x20, [("f", None, "/f.c", 1, 1)])])[1:],
    symcache_seed([(0x10, 0x20, [("f", None, "/f.c", 1, 1)])], bad_sum=True),
    b"\0PYROSYM",
    # Regression: only ranges without lines, so no frame array at all.
    symcache_seed([(0x10, 0x11, []), (0x20, 0x28, [])]),
]


def main():
    for target, seeds in SEEDS.items():
        d = os.path.join(HERE, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for i, s in enumerate(seeds):
            if isinstance(s, str):
                s = s.encode()
            with open(os.path.join(d, "seed-%02d" % i), "wb") as f:
                f.write(s)


if __name__ == "__main__":
    main()

/* fuzz_httpreq.c -- libFuzzer target for the listener's request parser
 * (uploader/httpreq.c).
 *
 * Input: the bytes a client sends, as they are (not a C string: the
 * parser takes a length, and the bytes are copied into a heap block of
 * exactly that size so ASan sees any read past it).  Invariants, from
 * httpreq.h:
 *   - the result is 0, -EAGAIN or one of 400, 405, 414, 431, 505, and a
 *     status comes with a reason;
 *   - -EAGAIN only below PS_HTTPREQ_MAX bytes and without an empty line
 *     after the request line;
 *   - 0: path starts with '/', path and query are NUL-terminated inside
 *     their arrays, printable ASCII, with no '?' in the path; the request
 *     was GET or HEAD;
 *   - feeding a prefix never gives 0 where the whole gives an error (a
 *     request is judged on what has arrived, never accepted early);
 *   - the query and seconds helpers stay inside their output buffers.
 */
#include <errno.h>

#include "fuzz.h"
#include "uploader/httpreq.h"

static void
check_ok(const struct ps_httpreq *rq)
{
	size_t i, n = strnlen(rq->path, sizeof(rq->path));

	FUZZ_ASSERT(n < sizeof(rq->path) && n > 0 && rq->path[0] == '/');
	FUZZ_ASSERT(!strchr(rq->path, '?'));
	for (i = 0; i < n; i++)
		FUZZ_ASSERT(rq->path[i] > ' ' && rq->path[i] < 0x7f);
	n = strnlen(rq->query, sizeof(rq->query));
	FUZZ_ASSERT(n < sizeof(rq->query));
	for (i = 0; i < n; i++)
		FUZZ_ASSERT(rq->query[i] > ' ' && rq->query[i] < 0x7f);
	FUZZ_ASSERT(rq->head == 0 || rq->head == 1);
}

static void
check_query(const char *query)
{
	uint8_t out[16 + FUZZ_GUARD];
	unsigned s = 12345;
	int rc;

	memset(out, FUZZ_GUARD_BYTE, sizeof(out));
	rc = ps_httpreq_query(query, "seconds", (char *)out, 16);
	FUZZ_ASSERT(rc >= -1 && rc <= 1);
	for (size_t i = 16; i < sizeof(out); i++)
		FUZZ_ASSERT(out[i] == FUZZ_GUARD_BYTE);
	if (rc == 1) {
		FUZZ_ASSERT(strnlen((char *)out, 16) < 16);
		rc = ps_httpreq_seconds((char *)out, 300, &s);
		FUZZ_ASSERT(rc == 0 || rc == -EINVAL || rc == -ERANGE);
		FUZZ_ASSERT(rc != 0 || (s >= 1 && s <= 300));
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ps_httpreq rq, rq2;
	char *buf = malloc(size ? size : 1);
	int rc, rc2;

	if (!buf)
		abort();
	memcpy(buf, data, size);
	rc = ps_httpreq_parse(buf, size, &rq);
	FUZZ_ASSERT(rc == 0 || rc == -EAGAIN || rc == 400 || rc == 405 || rc == 414 ||
		    rc == 431 || rc == 505);
	if (rc > 0)
		FUZZ_ASSERT(rq.why && rq.why[0]);
	if (rc == -EAGAIN)
		FUZZ_ASSERT(size < PS_HTTPREQ_MAX);
	if (rc == 0) {
		check_ok(&rq);
		check_query(rq.query);
	}
	if (size > 1) {
		rc2 = ps_httpreq_parse(buf, size / 2, &rq2);
		FUZZ_ASSERT(!(rc2 == 0 && rc > 0 && rc != 431));
	}
	free(buf);
	return 0;
}

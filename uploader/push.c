/* push.c -- PushRequest bodies for Pyroscope's push API.  See push.h.
 *
 * The message is three levels of length-delimited fields, so it is
 * written by hand rather than through nanopb: every length is known
 * before its bytes are written (sizes first, then one pass). */
#include "uploader/push.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static size_t
varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static int
put_varint(struct ps_buf *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	while (v >= 0x80) {
		tmp[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (uint8_t)v;
	return ps_buf_append(b, tmp, n);
}

/* Field `field` of wire type 2 (bytes, string, message) holding len bytes:
 * the key and the length. */
static int
put_head(struct ps_buf *b, unsigned field, size_t len)
{
	int rc = put_varint(b, (uint64_t)field << 3 | 2);

	return rc ? rc : put_varint(b, len);
}

static size_t
field_len(size_t len)
{
	return 1 + varint_len(len) + len;
}

static int
put_bytes(struct ps_buf *b, unsigned field, const void *p, size_t len)
{
	int rc = put_head(b, field, len);

	return rc ? rc : ps_buf_append(b, p, len);
}

static size_t
label_len(const struct ps_push_label *l)
{
	return field_len(strlen(l->name)) + field_len(strlen(l->value));
}

/* A random UUID v4, as the SDKs send; a time-based fallback if
 * getrandom fails (the ID only has to be unique enough to deduplicate). */
static void
uuid4(char out[37])
{
	uint8_t r[16];
	struct timespec ts;
	size_t i;

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		clock_gettime(CLOCK_REALTIME, &ts);
		for (i = 0; i < sizeof(r); i++)
			r[i] = (uint8_t)((uint64_t)ts.tv_nsec >> (i % 4 * 8) ^ (uint64_t)ts.tv_sec >> (i % 8 * 8) ^ i * 37u);
	}
	r[6] = (uint8_t)(r[6] & 0x0f) | 0x40;
	r[8] = (uint8_t)(r[8] & 0x3f) | 0x80;
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12],
		 r[13], r[14], r[15]);
}

int
ps_push_request(const struct ps_push_label *labels, size_t n, const void *profile, size_t len,
		struct ps_buf *out)
{
	size_t start = out ? out->len : 0, series = 0, sample, i;
	char id[37];
	int rc;

	if (!out || !profile || !len || (n && !labels))
		return -EINVAL;
	uuid4(id);
	sample = field_len(len) + field_len(strlen(id));
	for (i = 0; i < n; i++)
		series += field_len(label_len(&labels[i]));
	series += field_len(sample);
	rc = put_head(out, 1, series);
	for (i = 0; !rc && i < n; i++) {
		rc = put_head(out, 1, label_len(&labels[i]));
		if (!rc)
			rc = put_bytes(out, 1, labels[i].name, strlen(labels[i].name));
		if (!rc)
			rc = put_bytes(out, 2, labels[i].value, strlen(labels[i].value));
	}
	if (!rc)
		rc = put_head(out, 2, sample);
	if (!rc)
		rc = put_bytes(out, 1, profile, len);
	if (!rc)
		rc = put_bytes(out, 2, id, strlen(id));
	if (rc)
		out->len = start;
	return rc;
}

static int
has(const struct ps_push_label *l, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(l[i].name, name))
			return 1;
	return 0;
}

static void
add(struct ps_push_label *l, size_t *n, const char *name, const char *value)
{
	snprintf(l[*n].name, sizeof(l[*n].name), "%s", name);
	l[*n].value = value;
	(*n)++;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(((const struct ps_push_label *)a)->name,
		      ((const struct ps_push_label *)b)->name);
}

size_t
ps_push_labels(const char *profile_name, const char *app, const struct ps_tags *t,
	       struct ps_push_label *out, unsigned *dropped)
{
	const char *svc = t ? ps_tags_get(t, "service_name") : NULL;
	size_t n = 0, j;
	unsigned i;

	*dropped = 0;
	add(out, &n, "__name__", profile_name);
	add(out, &n, "__delta__", "false");
	add(out, &n, "service_name", svc ? svc : app);
	add(out, &n, "pyroscope_spy", "pyroshim");
	for (i = 0; t && i < t->n; i++) {
		struct ps_push_label *l = &out[n];

		if (!strcmp(t->tag[i].key, "service_name"))
			continue;
		if (n == PS_PUSH_MAX_LABELS) {
			(*dropped)++;
			continue;
		}
		snprintf(l->name, sizeof(l->name), "%s", t->tag[i].key);
		for (j = 0; l->name[j]; j++)
			if (l->name[j] == '.')
				l->name[j] = '_';
		/* Tag names may start with a digit; label names may not. */
		if (has(out, n, l->name) || (l->name[0] >= '0' && l->name[0] <= '9')) {
			(*dropped)++;
			continue;
		}
		l->value = t->tag[i].value;
		n++;
	}
	qsort(out, n, sizeof(*out), by_name);
	return n;
}

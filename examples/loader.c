/* loader.c -- load examples/generator's rating events into PostgreSQL.
 *
 *   usage: loader DSN events.json
 *
 * A demo workload for pyroshim, not part of the library: it links only
 * libpq and is meant to be run under LD_PRELOAD=libpyroshim.so.
 *
 * The whole file is read and checked before the database is touched, so a
 * bad file inserts nothing.  The parser is strict and knows exactly one
 * format: a JSON array of flat objects whose members are the sixteen event
 * fields (each exactly once, in any order), strings where the table has
 * text, uuid or timestamptz, and integers without fraction or exponent
 * where it has smallint or integer.  Anything else (nesting, true, false,
 * null, floats, unknown or missing fields, trailing data) is an error that
 * names the line and column.  Strings are unescaped in place in the file
 * buffer: an escape is never shorter than the bytes it stands for.
 * The database checks what JSON cannot: uuid and timestamp syntax, UTF-8.
 *
 * The database side is deliberately the naive first version, so that a
 * profile shows where the time goes: the table is created if missing
 * (SCHEMA_SQL, the same statements as examples/schema.sql), then every
 * event is one PQexecParams() INSERT in autocommit, i.e. one round trip
 * and one commit per row.  A file loaded twice fails on the primary key.
 *
 * Exit status: 0 success (prints "loaded N events"), 1 any error (message
 * on stderr), 2 usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#define MAX_FILE_BYTES	(1UL << 30)	/* the file is held in memory */
#define MAX_EVENTS	4000000UL	/* more than 1 GiB of events can hold */
#define FIRST_READ	(64 * 1024)
#define NFIELDS		16

/* Keep in sync with examples/schema.sql. */
static const char SCHEMA_SQL[] =
	"CREATE TABLE IF NOT EXISTS event ("
	" event_source text NOT NULL,"
	" event_ref uuid NOT NULL,"
	" event_type smallint NOT NULL,"
	" event_date timestamptz NOT NULL,"
	" calling_number text NOT NULL,"
	" called_number text NOT NULL,"
	" location text NOT NULL,"
	" duration_seconds integer NOT NULL,"
	" attr_1 text NOT NULL, attr_2 text NOT NULL,"
	" attr_3 text NOT NULL, attr_4 text NOT NULL,"
	" attr_5 text NOT NULL, attr_6 text NOT NULL,"
	" attr_7 text NOT NULL, attr_8 text NOT NULL,"
	" PRIMARY KEY (event_source, event_ref));"
	"CREATE INDEX IF NOT EXISTS event_event_date_idx ON event (event_date);"
	"CREATE INDEX IF NOT EXISTS event_event_type_idx ON event (event_type);";

/* Parameters in FIELDS order. */
static const char INSERT_SQL[] =
	"INSERT INTO event (event_source, event_ref, event_type, event_date,"
	" calling_number, called_number, location, duration_seconds,"
	" attr_1, attr_2, attr_3, attr_4, attr_5, attr_6, attr_7, attr_8)"
	" VALUES ($1, $2, $3, $4, $5, $6, $7, $8,"
	" $9, $10, $11, $12, $13, $14, $15, $16)";

enum ftype { F_STR, F_INT };

static const struct field {
	const char *name;
	enum ftype type;
	long long min, max;	/* the column's range, F_INT only */
} FIELDS[NFIELDS] = {
	{ "event_source", F_STR, 0, 0 },
	{ "event_ref", F_STR, 0, 0 },
	{ "event_type", F_INT, INT16_MIN, INT16_MAX },
	{ "event_date", F_STR, 0, 0 },
	{ "calling_number", F_STR, 0, 0 },
	{ "called_number", F_STR, 0, 0 },
	{ "location", F_STR, 0, 0 },
	{ "duration_seconds", F_INT, INT32_MIN, INT32_MAX },
	{ "attr_1", F_STR, 0, 0 }, { "attr_2", F_STR, 0, 0 },
	{ "attr_3", F_STR, 0, 0 }, { "attr_4", F_STR, 0, 0 },
	{ "attr_5", F_STR, 0, 0 }, { "attr_6", F_STR, 0, 0 },
	{ "attr_7", F_STR, 0, 0 }, { "attr_8", F_STR, 0, 0 },
};

struct event {
	union {
		const char *s;	/* points into the file buffer */
		long long i;
	} v[NFIELDS];		/* in FIELDS order */
};

struct parser {
	const char *path;	/* for messages */
	char *base;		/* the file; strings are unescaped in place */
	char *p;		/* next byte to read */
	char *end;		/* one past the last byte; *end is a NUL */
};

/* Print "path:line:col: message" for the current position.  Returns
 * -EINVAL so that callers can `return fail(...)`. */
static int __attribute__((format(printf, 2, 3)))
fail(const struct parser *ps, const char *fmt, ...)
{
	size_t line = 1, col = 1;
	va_list ap;

	for (const char *q = ps->base; q < ps->p; q++) {
		col = *q == '\n' ? 1 : col + 1;
		line += *q == '\n';
	}
	fprintf(stderr, "loader: %s:%zu:%zu: ", ps->path, line, col);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -EINVAL;
}

static void
skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
				   *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

/* Consume byte c (after blanks) or fail naming what was expected. */
static int
expect(struct parser *ps, char c, const char *what)
{
	skip_ws(ps);
	if (ps->p == ps->end || *ps->p != c)
		return fail(ps, "expected %s", what);
	ps->p++;
	return 0;
}

/* Read the 4 hex digits of a \u escape into *u.  Returns 0 or -EINVAL. */
static int
parse_hex4(struct parser *ps, unsigned *u)
{
	*u = 0;
	for (int i = 0; i < 4; i++, ps->p++) {
		char c = ps->p < ps->end ? *ps->p : '\0';
		int d = c >= '0' && c <= '9' ? c - '0' :
			c >= 'a' && c <= 'f' ? c - 'a' + 10 :
			c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

		if (d < 0)
			return fail(ps, "expected 4 hex digits after \\u");
		*u = *u << 4 | (unsigned)d;
	}
	return 0;
}

/* Write code point u as UTF-8 at *w and advance *w. */
static void
put_utf8(char **w, unsigned u)
{
	unsigned char *o = (unsigned char *)*w;

	if (u < 0x80) {
		*o++ = (unsigned char)u;
	} else if (u < 0x800) {
		*o++ = (unsigned char)(0xc0 | u >> 6);
		*o++ = (unsigned char)(0x80 | (u & 0x3f));
	} else if (u < 0x10000) {
		*o++ = (unsigned char)(0xe0 | u >> 12);
		*o++ = (unsigned char)(0x80 | (u >> 6 & 0x3f));
		*o++ = (unsigned char)(0x80 | (u & 0x3f));
	} else {
		*o++ = (unsigned char)(0xf0 | u >> 18);
		*o++ = (unsigned char)(0x80 | (u >> 12 & 0x3f));
		*o++ = (unsigned char)(0x80 | (u >> 6 & 0x3f));
		*o++ = (unsigned char)(0x80 | (u & 0x3f));
	}
	*w = (char *)o;
}

/* Decode a \u escape (ps->p just past the 'u'), joining a surrogate pair,
 * and write it as UTF-8 at *w.  Returns 0 or -EINVAL. */
static int
parse_unicode(struct parser *ps, char **w)
{
	unsigned u, lo;

	if (parse_hex4(ps, &u))
		return -EINVAL;
	if (u == 0)
		return fail(ps, "\\u0000 is not allowed (text cannot hold NUL)");
	if (u >= 0xdc00 && u <= 0xdfff)
		return fail(ps, "lone low surrogate in \\u escape");
	if (u >= 0xd800 && u <= 0xdbff) {
		if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
			return fail(ps, "high surrogate without a low one");
		ps->p += 2;
		if (parse_hex4(ps, &lo))
			return -EINVAL;
		if (lo < 0xdc00 || lo > 0xdfff)
			return fail(ps, "high surrogate without a low one");
		u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
	}
	put_utf8(w, u);
	return 0;
}

/* Decode the escape at ps->p (just past the backslash) to *w. */
static int
parse_escape(struct parser *ps, char **w)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *hit;

	if (ps->p == ps->end)
		return fail(ps, "unterminated string");
	if (*ps->p == 'u') {
		ps->p++;
		return parse_unicode(ps, w);
	}
	hit = *ps->p ? strchr(from, *ps->p) : NULL;
	if (!hit)
		return fail(ps, "invalid escape \\%c", *ps->p);
	*(*w)++ = to[hit - from];
	ps->p++;
	return 0;
}

/* Parse a string (after blanks) and unescape it in place; *out becomes a
 * NUL-terminated string inside the file buffer.  Returns 0 or -EINVAL. */
static int
parse_string(struct parser *ps, const char **out)
{
	char *w;

	skip_ws(ps);
	if (ps->p == ps->end || *ps->p != '"')
		return fail(ps, "expected a string");
	w = ++ps->p;
	*out = w;
	while (ps->p < ps->end && *ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p;

		if (c < 0x20)
			return fail(ps, "control character 0x%02x in string", c);
		if (c != '\\') {
			*w++ = *ps->p++;
			continue;
		}
		ps->p++;
		if (parse_escape(ps, &w))
			return -EINVAL;
	}
	if (ps->p == ps->end)
		return fail(ps, "unterminated string");
	ps->p++;
	*w = '\0';	/* at or before the closing quote just passed */
	return 0;
}

/* Parse a JSON integer within [min, max] into *v.  Returns 0 or -EINVAL. */
static int
parse_int(struct parser *ps, long long min, long long max, long long *v)
{
	int neg;
	unsigned long long x = 0, lim;

	skip_ws(ps);
	neg = ps->p < ps->end && *ps->p == '-';
	ps->p += neg;
	if (ps->p == ps->end || *ps->p < '0' || *ps->p > '9')
		return fail(ps, "expected an integer");
	if (*ps->p == '0' && ps->p + 1 < ps->end && ps->p[1] >= '0' &&
	    ps->p[1] <= '9')
		return fail(ps, "leading zero in integer");
	lim = neg ? (unsigned long long)-(min + 1) + 1 : (unsigned long long)max;
	for (; ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9'; ps->p++) {
		unsigned d = (unsigned)(*ps->p - '0');

		if (x > (lim - d) / 10)
			return fail(ps, "integer out of range [%lld, %lld]", min,
				    max);
		x = x * 10 + d;
	}
	if (ps->p < ps->end && strchr(".eE", *ps->p) && *ps->p)
		return fail(ps, "only integers are allowed here");
	*v = neg ? (long long)(0 - x) : (long long)x;
	return 0;
}

/* Parse one "key": value member into ev, marking the field in *seen. */
static int
parse_member(struct parser *ps, struct event *ev, unsigned *seen)
{
	const char *key;
	const struct field *f;
	size_t i;

	if (parse_string(ps, &key))
		return -EINVAL;
	for (i = 0; i < NFIELDS && strcmp(FIELDS[i].name, key); i++)
		;
	if (i == NFIELDS)
		return fail(ps, "unknown field \"%s\"", key);
	if (*seen & 1u << i)
		return fail(ps, "duplicate field \"%s\"", key);
	*seen |= 1u << i;
	if (expect(ps, ':', "':'"))
		return -EINVAL;
	f = &FIELDS[i];
	skip_ws(ps);
	if (f->type == F_INT)
		return parse_int(ps, f->min, f->max, &ev->v[i].i);
	if (ps->p == ps->end || *ps->p != '"')
		return fail(ps, "field \"%s\" must be a string", f->name);
	return parse_string(ps, &ev->v[i].s);
}

/* Parse one event object with every field exactly once. */
static int
parse_object(struct parser *ps, struct event *ev)
{
	unsigned seen = 0;

	if (expect(ps, '{', "'{' (an event object)"))
		return -EINVAL;
	for (;;) {
		if (parse_member(ps, ev, &seen))
			return -EINVAL;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (expect(ps, '}', "',' or '}'"))
			return -EINVAL;
		break;
	}
	for (size_t i = 0; i < NFIELDS; i++)
		if (!(seen & 1u << i))
			return fail(ps, "event lacks field \"%s\"",
				    FIELDS[i].name);
	return 0;
}

/* Make room for one more event in *evs, doubling up to MAX_EVENTS. */
static int
grow_events(struct parser *ps, struct event **evs, size_t n, size_t *alloc)
{
	struct event *grown;
	size_t want = *alloc ? *alloc * 2 : 1024;

	if (n < *alloc)
		return 0;
	if (n >= MAX_EVENTS)
		return fail(ps, "more than %lu events", MAX_EVENTS);
	if (want > MAX_EVENTS)
		want = MAX_EVENTS;
	grown = realloc(*evs, want * sizeof(**evs));
	if (!grown) {
		fprintf(stderr, "loader: out of memory at event %zu\n", n + 1);
		return -ENOMEM;
	}
	*evs = grown;
	*alloc = want;
	return 0;
}

/* Parse the whole file into a malloc'ed array *evs of *n events (the
 * caller frees it; on failure it is freed here).  Returns 0, -EINVAL
 * or -ENOMEM, with a message printed. */
static int
parse_events(struct parser *ps, struct event **evs, size_t *n)
{
	size_t alloc = 0;
	int err;

	*evs = NULL;
	*n = 0;
	err = expect(ps, '[', "'[' (an array of events)");
	skip_ws(ps);
	if (!err && ps->p < ps->end && *ps->p == ']') {
		ps->p++;
		goto out_tail;
	}
	while (!err) {
		err = grow_events(ps, evs, *n, &alloc);
		if (!err)
			err = parse_object(ps, &(*evs)[*n]);
		if (err)
			break;
		(*n)++;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',')
			ps->p++;
		else if (!(err = expect(ps, ']', "',' or ']'")))
			goto out_tail;
	}
	free(*evs);
	*evs = NULL;
	return err;

out_tail:
	skip_ws(ps);
	if (ps->p == ps->end)
		return 0;
	free(*evs);
	*evs = NULL;
	return fail(ps, "unexpected data after the array");
}

/* Double the read buffer *b of *alloc bytes (n used), up to
 * MAX_FILE_BYTES.  Returns 0, -EFBIG or -ENOMEM (*b is then unchanged). */
static int
grow_read_buf(char **b, size_t *alloc, size_t n)
{
	size_t want = *alloc ? *alloc * 2 : FIRST_READ;
	char *grown;

	if (want > MAX_FILE_BYTES)
		want = MAX_FILE_BYTES;
	if (n + 1 >= want)
		return -EFBIG;
	grown = realloc(*b, want);
	if (!grown)
		return -ENOMEM;
	*b = grown;
	*alloc = want;
	return 0;
}

/* Read fd to its end into a malloc'ed, NUL-terminated *buf of *len bytes
 * (plus the NUL).  Returns 0, -EFBIG (MAX_FILE_BYTES reached), -ENOMEM or
 * the read's -errno. */
static int
read_fd(int fd, char **buf, size_t *len)
{
	size_t alloc = 0, n = 0;
	char *b = NULL;
	ssize_t r;
	int err;

	for (;;) {
		err = n + 1 < alloc ? 0 : grow_read_buf(&b, &alloc, n);
		if (err)
			goto out_free;
		r = read(fd, b + n, alloc - n - 1);
		if (r == 0)
			break;
		if (r < 0 && errno != EINTR) {
			err = -errno;
			goto out_free;
		}
		n += r > 0 ? (size_t)r : 0;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;

out_free:
	free(b);
	return err;
}

/* Read all of path as read_fd() does, printing a message on failure. */
static int
read_file(const char *path, char **buf, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int err;

	if (fd < 0) {
		err = -errno;
	} else {
		err = read_fd(fd, buf, len);
		close(fd);
	}
	if (err == -EFBIG)
		fprintf(stderr, "loader: %s: file too large (cap %lu bytes)\n",
			path, MAX_FILE_BYTES - 1);
	else if (err)
		fprintf(stderr, "loader: %s: %s\n", path, strerror(-err));
	return err;
}

/* Run sql (one or more statements without results).  Returns 0 or -EIO
 * with the server's message printed. */
static int
db_exec(PGconn *conn, const char *sql, const char *what)
{
	PGresult *res = PQexec(conn, sql);
	int err = 0;

	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		fprintf(stderr, "loader: %s: %s", what,
			PQresultErrorMessage(res));
		err = -EIO;
	}
	PQclear(res);
	return err;
}

/* INSERT event number index (0-based) in its own implicit transaction.
 * Returns 0 or -EIO with the server's message printed. */
static int
insert_event(PGconn *conn, const struct event *ev, size_t index)
{
	char nums[NFIELDS][24];
	const char *vals[NFIELDS];
	PGresult *res;
	int err = 0;

	for (size_t i = 0; i < NFIELDS; i++) {
		vals[i] = ev->v[i].s;
		if (FIELDS[i].type == F_INT) {
			snprintf(nums[i], sizeof(nums[i]), "%lld", ev->v[i].i);
			vals[i] = nums[i];
		}
	}
	res = PQexecParams(conn, INSERT_SQL, NFIELDS, NULL, vals, NULL, NULL,
			   0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK) {
		fprintf(stderr, "loader: event %zu (event_ref %s): %s",
			index + 1, ev->v[1].s, PQresultErrorMessage(res));
		err = -EIO;
	}
	PQclear(res);
	return err;
}

/* Connect, create the schema and insert the n events one by one.
 * Returns 0 or -EIO with a message printed. */
static int
load(const char *dsn, const struct event *evs, size_t n)
{
	PGconn *conn = PQconnectdb(dsn);
	int err = -EIO;

	if (!conn) {
		fprintf(stderr, "loader: out of memory in PQconnectdb\n");
		return -EIO;
	}
	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "loader: cannot connect: %s",
			PQerrorMessage(conn));
		goto out_finish;
	}
	/* The file is UTF-8 whatever the server's encoding is. */
	if (PQsetClientEncoding(conn, "UTF8") != 0) {
		fprintf(stderr, "loader: cannot set client_encoding UTF8: %s",
			PQerrorMessage(conn));
		goto out_finish;
	}
	/* Silence "relation already exists, skipping" on a second run. */
	if (db_exec(conn, "SET client_min_messages = warning", "set") ||
	    db_exec(conn, SCHEMA_SQL, "create schema"))
		goto out_finish;
	for (size_t i = 0; i < n; i++)
		if (insert_event(conn, &evs[i], i))
			goto out_finish;
	err = 0;
out_finish:
	PQfinish(conn);
	return err;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: loader DSN events.json\n"
		   "  DSN          libpq connection string, e.g. "
		   "\"host=127.0.0.1 port=5432 dbname=postgres user=me\"\n"
		   "  events.json  output of examples/generator\n");
}

int
main(int argc, char **argv)
{
	struct parser ps = { 0 };
	struct event *evs = NULL;
	size_t len = 0, n = 0;
	int err;

	if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc != 3 || !*argv[2]) {
		usage(stderr);
		return 2;
	}
	ps.path = argv[2];
	if (read_file(ps.path, &ps.base, &len))
		return 1;
	ps.p = ps.base;
	ps.end = ps.base + len;
	err = parse_events(&ps, &evs, &n);
	if (!err)
		err = load(argv[1], evs, n);
	free(evs);
	free(ps.base);
	if (err)
		return 1;
	if (printf("loaded %zu events\n", n) < 0 || fflush(stdout) != 0) {
		perror("loader: stdout");
		return 1;
	}
	return 0;
}

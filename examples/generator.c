/* generator.c -- write N random "rating events" as one JSON array.
 *
 *   usage: generator N out.json [--seed S]
 *
 * A demo workload for pyroshim, not part of the library: it links no shim
 * code and is meant to be run under LD_PRELOAD=libpyroshim.so.  Each event
 * is one flat JSON object whose fields come in a fixed order (event_source,
 * event_ref, event_type, event_date, calling_number, called_number,
 * location, duration_seconds, attr_1..attr_8); examples/loader reads it.
 *
 * This is deliberately the naive first version a real project starts with,
 * so that a CPU and allocation flame graph has something worth fixing:
 *   - append_field() builds each event with repeated strcat(), which
 *     rescans the whole event text for every piece (quadratic per event);
 *   - random_string() and random_uuid() malloc every value separately and
 *     the caller frees it right after use;
 *   - json_escape() grows its output with one realloc() per character;
 *   - write_events() keeps every event text in an array grown by realloc()
 *     in a small fixed increment, and writes the file only at the end.
 * These functions are global and noinline so that they appear by name in a
 * profile.  None of it is quadratic in N: the per-event costs are bounded
 * by the event size, and glibc grows the large pointer array with mremap.
 *
 * Output is a pure function of (N, S) when --seed is given: the PRNG is our
 * own splitmix64 and the dates lie within the 30 days before a fixed epoch.
 * Without --seed, the seed comes from the clock and the pid, and the dates
 * lie within the 30 days before now.
 *
 * Exit status: 0 success, 1 I/O or memory error (message on stderr),
 * 2 usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#define MAX_EVENTS	1000000UL	/* every event is held in memory */
#define ATTR_MAX_LEN	40		/* attr_N is 0..40 characters */
#define EVENTS_GROW	64		/* naive: fixed increment, not doubling */
#define EVENT_INIT_LEN	64		/* first allocation of an event's text */
#define FIXED_EPOCH	1743379200	/* 2025-03-31T00:00:00Z, for --seed */
#define DATE_WINDOW	(30 * 86400)	/* dates fall in the 30 days before */
#define MAX_DURATION	7200		/* seconds; a call of up to two hours */

static const char ALNUM[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
static const char DIGITS[] = "0123456789";

static const char *const SOURCES[] = {
	"msc-berlin-01", "msc-hamburg-02", "ims-core-fra", "sbc-edge-muc",
	"voip-gw-cgn",
};

/* Some names need JSON escaping or are not ASCII, to exercise both ends. */
static const char *const LOCATIONS[] = {
	"Berlin", "Hamburg", "M\xc3\xbcnchen", "K\xc3\xb6ln", "Frankfurt am Main",
	"Stuttgart", "D\xc3\xbcsseldorf", "Leipzig", "Cell \"Nord\" 7",
	"Depot\\Ost", "Bremen\tHafen",
};

/* Number prefixes: country code plus a mobile or area prefix. */
static const char *const PREFIXES[] = {
	"+49151", "+49160", "+49170", "+49176", "+4930", "+4940", "+4989",
	"+33612", "+447700", "+1415",
};

static uint64_t rng_state;

/* splitmix64 (Vigna): small, fast, and the same on every platform. */
static uint64_t
rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* A number in [0, n).  The modulo bias is below 2^-50 for our small n. */
static uint32_t
rng_below(uint32_t n)
{
	return (uint32_t)(rng_next() % n);
}

/* A malloc'ed string of len characters drawn from alphabet, or NULL.  The
 * caller frees it. */
NOINLINE char *
random_string(const char *alphabet, size_t len)
{
	char *s = malloc(len + 1);

	if (!s)
		return NULL;
	for (size_t i = 0; i < len; i++)
		s[i] = alphabet[rng_below((uint32_t)strlen(alphabet))];
	s[len] = '\0';
	return s;
}

/* A malloc'ed random UUID v4 in canonical text form, or NULL. */
NOINLINE char *
random_uuid(void)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[16];
	char *s = malloc(37);
	size_t o = 0;

	if (!s)
		return NULL;
	for (size_t i = 0; i < sizeof(b); i += 8) {
		uint64_t r = rng_next();

		memcpy(b + i, &r, 8);
	}
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);	/* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);	/* RFC 4122 variant */
	for (size_t i = 0; i < sizeof(b); i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			s[o++] = '-';
		s[o++] = hex[b[i] >> 4];
		s[o++] = hex[b[i] & 0x0f];
	}
	s[o] = '\0';
	return s;
}

/* The JSON spelling of byte c into out (at most 7 bytes with the NUL). */
static void
escape_char(unsigned char c, char out[7])
{
	switch (c) {
	case '"':  strcpy(out, "\\\""); return;
	case '\\': strcpy(out, "\\\\"); return;
	case '\b': strcpy(out, "\\b"); return;
	case '\f': strcpy(out, "\\f"); return;
	case '\n': strcpy(out, "\\n"); return;
	case '\r': strcpy(out, "\\r"); return;
	case '\t': strcpy(out, "\\t"); return;
	}
	snprintf(out, 7, c < 0x20 ? "\\u%04x" : "%c", c);
}

/* Append the characters of e to the NUL-terminated malloc'ed *out, which
 * may move.  Naive on purpose: one strlen() and one realloc() per
 * character.  Returns 0 or -ENOMEM (*out is then unchanged). */
static int
push_chars(char **out, const char *e)
{
	for (; *e; e++) {
		size_t len = strlen(*out);
		char *grown = realloc(*out, len + 2);

		if (!grown)
			return -ENOMEM;
		*out = grown;
		(*out)[len] = *e;
		(*out)[len + 1] = '\0';
	}
	return 0;
}

/* A malloc'ed copy of s escaped for a JSON string (without the quotes), or
 * NULL.  Bytes >= 0x80 pass through, so UTF-8 input stays UTF-8.  Naive on
 * purpose: every character is formatted with snprintf(), and the output
 * grows by one strlen() and one realloc() per character. */
NOINLINE char *
json_escape(const char *s)
{
	char *out = malloc(1);

	if (!out)
		return NULL;
	out[0] = '\0';
	for (; *s; s++) {
		char e[7];

		escape_char((unsigned char)*s, e);
		if (push_chars(&out, e)) {
			free(out);
			return NULL;
		}
	}
	return out;
}

/* Append "key":value to the JSON object text in *json (which starts with
 * '{'), quoting value if quote is set; value must already be escaped.
 * *json is malloc'ed with *alloc bytes and may be moved.  Naive on purpose:
 * every strcat() rescans the whole event text.  Returns 0 or -ENOMEM. */
NOINLINE int
append_field(char **json, size_t *alloc, const char *key, const char *value,
	     int quote)
{
	size_t need = strlen(*json) + strlen(key) + strlen(value) + 8;

	if (need > *alloc) {
		char *grown = realloc(*json, need);

		if (!grown)
			return -ENOMEM;
		*json = grown;
		*alloc = need;
	}
	if (strlen(*json) > 1)
		strcat(*json, ",");
	strcat(*json, "\"");
	strcat(*json, key);
	strcat(*json, "\":");
	if (quote)
		strcat(*json, "\"");
	strcat(*json, value);
	if (quote)
		strcat(*json, "\"");
	return 0;
}

/* Escape raw (which the call frees, whatever the outcome) and append it as
 * a string field.  A NULL raw is an earlier allocation failure.  Returns 0
 * or -ENOMEM. */
static int
append_string(char **json, size_t *alloc, const char *key, char *raw)
{
	char *esc;
	int err;

	if (!raw)
		return -ENOMEM;
	esc = json_escape(raw);
	free(raw);
	if (!esc)
		return -ENOMEM;
	err = append_field(json, alloc, key, esc, 1);
	free(esc);
	return err;
}

static int
append_int(char **json, size_t *alloc, const char *key, long v)
{
	char num[24];

	snprintf(num, sizeof(num), "%ld", v);
	return append_field(json, alloc, key, num, 0);
}

/* event_type 1/2/3/5 with probabilities 15/20/20/45 %. */
static long
random_event_type(void)
{
	uint32_t r = rng_below(100);

	return r < 15 ? 1 : r < 35 ? 2 : r < 55 ? 3 : 5;
}

/* A malloc'ed ISO-8601 UTC time in the DATE_WINDOW before epoch, or NULL. */
static char *
random_date(time_t epoch)
{
	time_t t = epoch - 1 - (time_t)rng_below(DATE_WINDOW);
	struct tm tm;
	char *s = malloc(32);

	if (!s)
		return NULL;
	if (!gmtime_r(&t, &tm) ||
	    strftime(s, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* A malloc'ed E.164-like number: a known prefix and 7 or 8 digits. */
static char *
random_number(void)
{
	const char *prefix = PREFIXES[rng_below(ARRAY_LEN(PREFIXES))];
	char *digits = random_string(DIGITS, 7 + rng_below(2));
	char *s;

	if (!digits)
		return NULL;
	s = malloc(strlen(prefix) + strlen(digits) + 1);
	if (s) {
		strcpy(s, prefix);
		strcat(s, digits);
	}
	free(digits);
	return s;
}

/* The malloc'ed JSON text of one random event, or NULL on ENOMEM.  Dates
 * fall in the DATE_WINDOW before epoch.  Every field is attempted even
 * after a failure so that the random sequence does not depend on it. */
NOINLINE char *
build_event_json(time_t epoch)
{
	size_t alloc = EVENT_INIT_LEN;
	char *json = malloc(alloc);
	int err = 0;

	if (!json)
		return NULL;
	strcpy(json, "{");
	err |= append_string(&json, &alloc, "event_source",
			     strdup(SOURCES[rng_below(ARRAY_LEN(SOURCES))]));
	err |= append_string(&json, &alloc, "event_ref", random_uuid());
	err |= append_int(&json, &alloc, "event_type", random_event_type());
	err |= append_string(&json, &alloc, "event_date", random_date(epoch));
	err |= append_string(&json, &alloc, "calling_number", random_number());
	err |= append_string(&json, &alloc, "called_number", random_number());
	err |= append_string(&json, &alloc, "location",
			     strdup(LOCATIONS[rng_below(ARRAY_LEN(LOCATIONS))]));
	err |= append_int(&json, &alloc, "duration_seconds",
			  (long)rng_below(MAX_DURATION + 1));
	for (int i = 1; i <= 8; i++) {
		char key[8];

		snprintf(key, sizeof(key), "attr_%d", i);
		err |= append_string(&json, &alloc, key,
				     random_string(ALNUM,
						   rng_below(ATTR_MAX_LEN + 1)));
	}
	if (err || strlen(json) + 2 > alloc) {
		free(json);
		return NULL;
	}
	strcat(json, "}");
	return json;
}

/* Write the n texts as a JSON array, one event per line.  Returns 0 or a
 * negative errno; a message is printed on failure. */
static int
write_file(const char *path, char **events, size_t n)
{
	FILE *f = fopen(path, "w");
	int err = 0;

	if (!f) {
		err = -errno;
		fprintf(stderr, "generator: %s: %s\n", path, strerror(errno));
		return err;
	}
	errno = 0;	/* so that a failed write leaves its own cause */
	fputs("[\n", f);
	for (size_t i = 0; i < n; i++) {
		fputs(events[i], f);
		fputs(i + 1 < n ? ",\n" : "\n", f);
	}
	fputs("]\n", f);
	if (ferror(f))
		err = errno ? -errno : -EIO;
	if (fclose(f) != 0 && !err)
		err = errno ? -errno : -EIO;
	if (err)
		fprintf(stderr, "generator: %s: write failed: %s\n", path,
			strerror(-err));
	return err;
}

static void
free_events(char **events, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(events[i]);
	free(events);
}

/* Make room for EVENTS_GROW more pointers in *events.  Naive on purpose:
 * a fixed increment instead of doubling.  Returns 0 or -ENOMEM. */
static int
grow_events(char ***events, size_t *alloc)
{
	char **grown = realloc(*events, (*alloc + EVENTS_GROW) *
					sizeof(**events));

	if (!grown)
		return -ENOMEM;
	*events = grown;
	*alloc += EVENTS_GROW;
	return 0;
}

/* Build n events (dates before epoch), keep them all in memory, then write
 * them to path.  Returns 0, -ENOMEM or the negative errno of a failed
 * write; a message is printed on failure. */
NOINLINE int
write_events(const char *path, size_t n, time_t epoch)
{
	char **events = NULL;
	size_t len = 0, alloc = 0;
	int err;

	while (len < n) {
		if (len == alloc && grow_events(&events, &alloc))
			goto out_nomem;
		events[len] = build_event_json(epoch);
		if (!events[len])
			goto out_nomem;
		len++;
	}
	err = write_file(path, events, len);
	free_events(events, len);
	return err;

out_nomem:
	free_events(events, len);
	fprintf(stderr, "generator: out of memory after %zu events\n", len);
	return -ENOMEM;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: generator N out.json [--seed S]\n"
		   "  N     number of events, 0..%lu\n"
		   "  S     unsigned 64-bit seed; output is then reproducible\n",
		MAX_EVENTS);
}

/* Parse a whole decimal string into *v, refusing signs, blanks, overflow
 * and values above max.  Returns 0 or -EINVAL. */
static int
parse_u64(const char *s, uint64_t max, uint64_t *v)
{
	char *end;
	unsigned long long x;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end || x > max)
		return -EINVAL;
	*v = x;
	return 0;
}

struct args {
	const char *path;
	uint64_t n;
	uint64_t seed;
	int seeded;
};

/* Fill a from argv.  Returns 0, 1 for --help, or -EINVAL. */
static int
parse_args(int argc, char **argv, struct args *a)
{
	const char *pos[2];
	int npos = 0;

	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "-h") || !strcmp(s, "--help"))
			return 1;
		if (!strcmp(s, "--seed") && i + 1 < argc)
			s = argv[++i];
		else if (!strncmp(s, "--seed=", 7))
			s += 7;
		else if (s[0] == '-' && s[1] != '\0')
			return -EINVAL;		/* unknown option */
		else if (npos < 2) {
			pos[npos++] = s;
			continue;
		} else
			return -EINVAL;		/* extra operand */
		if (a->seeded || parse_u64(s, UINT64_MAX, &a->seed))
			return -EINVAL;
		a->seeded = 1;
	}
	if (npos != 2 || parse_u64(pos[0], MAX_EVENTS, &a->n) || !*pos[1])
		return -EINVAL;
	a->path = pos[1];
	return 0;
}

int
main(int argc, char **argv)
{
	struct args a = { 0 };
	time_t epoch = FIXED_EPOCH;
	int r = parse_args(argc, argv, &a);

	if (r == 1) {
		usage(stdout);
		return 0;
	}
	if (r) {
		usage(stderr);
		return 2;
	}
	if (a.seeded) {
		rng_state = a.seed;
	} else {
		struct timespec ts;

		if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
			perror("generator: clock_gettime");
			return 1;
		}
		epoch = ts.tv_sec;
		rng_state = (uint64_t)ts.tv_sec * 1000000007ULL ^
			    (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
	}
	return write_events(a.path, (size_t)a.n, epoch) ? 1 : 0;
}

/* fuzz_tags.c -- libFuzzer target for uploader/tags.c: ps_tags_parse,
 * ps_tags_add, ps_tags_format_name and ps_app_name_sanitize.
 *
 * Input: a byte giving the application-name buffer length and the format
 * buffer shortfall, then NUL-separated strings: the tag list, a key, a
 * value and an application name.
 * Invariants, from tags.h:
 *   - every kept tag obeys the rules (name [A-Za-z0-9_.]+ not "__...",
 *     value 1..PS_TAGS_VALUE_MAX bytes of valid UTF-8 without `,{}=`,
 *     control characters or surrounding spaces), names are unique;
 *   - the report lists at most PS_REPORT_ITEMS printable names;
 *   - parse -> format -> parse gives the same set (the round trip the
 *     server relies on: `name` has no escaping);
 *   - parsing the same list again adds nothing and changes nothing;
 *   - ps_tags_add agrees with ps_tags_parse on a single `k=v` and never
 *     overwrites; a refused add leaves the set untouched;
 *   - a name that does not fit gives -ENOSPC, "" and no write past len;
 *   - sanitising is idempotent and yields [A-Za-z0-9_./-]+ that
 *     ps_tags_format_name accepts.
 */
#include <errno.h>

#include "fuzz.h"
#include "uploader/tags.h"

static int
name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.';
}

static void
check_tag(const struct ps_tag *g)
{
	size_t kn = strnlen(g->key, sizeof(g->key));
	size_t vn = strnlen(g->value, sizeof(g->value));

	FUZZ_ASSERT(kn >= 1 && kn <= PS_TAGS_KEY_MAX);
	FUZZ_ASSERT(vn >= 1 && vn <= PS_TAGS_VALUE_MAX);
	FUZZ_ASSERT(strncmp(g->key, "__", 2) != 0);
	for (size_t i = 0; i < kn; i++)
		FUZZ_ASSERT(name_char(g->key[i]));
	FUZZ_ASSERT(g->value[0] != ' ' && g->value[vn - 1] != ' ');
	for (size_t i = 0; i < vn; i++) {
		unsigned char c = (unsigned char)g->value[i];

		FUZZ_ASSERT(c >= 0x20 && c != 0x7f && !strchr(",{}=", c));
	}
	FUZZ_ASSERT(fuzz_utf8_ok((const unsigned char *)g->value, vn));
}

static void
check_set(const struct ps_tags *t, const struct ps_report *rep)
{
	FUZZ_ASSERT(t->n <= PS_TAGS_MAX);
	for (unsigned i = 0; i < t->n; i++) {
		check_tag(&t->tag[i]);
		for (unsigned j = 0; j < i; j++)
			FUZZ_ASSERT(strcmp(t->tag[i].key, t->tag[j].key) != 0);
		FUZZ_ASSERT(ps_tags_get(t, t->tag[i].key) == t->tag[i].value);
	}
	FUZZ_ASSERT(rep->listed <= PS_REPORT_ITEMS && rep->listed <= rep->dropped);
	for (unsigned i = 0; i < rep->listed; i++) {
		const char *nm = rep->item[i].name;
		size_t n = strnlen(nm, PS_REPORT_NAME);

		FUZZ_ASSERT(n < PS_REPORT_NAME);
		for (size_t k = 0; k < n; k++)
			FUZZ_ASSERT(nm[k] >= 0x20 && nm[k] < 0x7f);
		FUZZ_ASSERT(rep->item[i].why >= PS_TAGS_DROP_SYNTAX &&
			    rep->item[i].why <= PS_TAGS_DROP_FULL);
		FUZZ_ASSERT(ps_tags_drop_str(rep->item[i].why) != NULL);
	}
}

static int
same_set(const struct ps_tags *a, const struct ps_tags *b)
{
	if (a->n != b->n)
		return 0;
	for (unsigned i = 0; i < a->n; i++)
		if (strcmp(a->tag[i].key, b->tag[i].key) ||
		    strcmp(a->tag[i].value, b->tag[i].value))
			return 0;
	return 1;
}

/* Format as "app.cpu{...}", strip the braces, parse again. */
static void
round_trip(const struct ps_tags *t, unsigned short_by)
{
	static char buf[PS_TAGS_MAX * (PS_TAGS_KEY_MAX + PS_TAGS_VALUE_MAX + 2) + 64];
	static struct ps_tags back;
	struct ps_report rep = { 0 };
	size_t n, cut;

	FUZZ_ASSERT(ps_tags_format_name("my-app/x", "cpu", t, buf, sizeof(buf)) == 0);
	n = strlen(buf);
	FUZZ_ASSERT(!strncmp(buf, "my-app/x.cpu{", 13) && buf[n - 1] == '}');
	buf[n - 1] = '\0';
	memset(&back, 0, sizeof(back));
	FUZZ_ASSERT(ps_tags_parse(&back, buf + 13, &rep) == (int)t->n);
	FUZZ_ASSERT(rep.dropped == 0 && same_set(t, &back));

	/* One byte short (or more): -ENOSPC, "" and nothing past cut. */
	cut = n + 1 > short_by + 1 ? n + 1 - (short_by + 1) : 1;
	fuzz_guard_set(buf, cut);
	FUZZ_ASSERT(ps_tags_format_name("my-app/x", "cpu", t, buf, cut) == -ENOSPC);
	FUZZ_ASSERT(buf[0] == '\0' && fuzz_guard_ok(buf, cut));
}

/* Whether s starts or ends with what ps_tags_parse() trims (and
 * ps_tags_add() does not). */
static int
edge_space(const char *s)
{
	size_t n = strlen(s);

	return n && (strchr(" \t\n\r\v\f", s[0]) || strchr(" \t\n\r\v\f", s[n - 1]));
}

static void
check_add(struct ps_tags *t, const char *key, const char *value)
{
	static struct ps_tags before, one;
	const char *old = ps_tags_get(t, key);
	char spec[PS_TAGS_KEY_MAX + PS_TAGS_VALUE_MAX + 8];
	int rc, single;

	before = *t;
	rc = ps_tags_add(t, key, value);
	FUZZ_ASSERT(rc == 0 || rc == 1 || rc == -EINVAL || rc == -ENOSPC);
	if (rc != 0)
		FUZZ_ASSERT(!memcmp(&before, t, sizeof(*t)));
	if (rc == 1)
		FUZZ_ASSERT(old != NULL);
	if (rc == 0) {
		FUZZ_ASSERT(old == NULL && t->n == before.n + 1);
		FUZZ_ASSERT(!strcmp(ps_tags_get(t, key), value));
	}
	/* Differential: the same pair as a one-member list, when the list
	 * syntax can carry it unchanged. */
	if (strlen(key) > PS_TAGS_KEY_MAX || strlen(value) > PS_TAGS_VALUE_MAX ||
	    strchr(key, ',') || strchr(key, '=') || strchr(value, ',') ||
	    edge_space(key) || edge_space(value))
		return;
	snprintf(spec, sizeof(spec), "%s=%s", key, value);
	memset(&one, 0, sizeof(one));
	single = ps_tags_parse(&one, spec, NULL);
	FUZZ_ASSERT(single == 0 || single == 1);
	memset(&before, 0, sizeof(before));
	rc = ps_tags_add(&before, key, value);
	FUZZ_ASSERT(rc == 0 || rc == -EINVAL);
	FUZZ_ASSERT((rc == 0) == (single == 1));
	if (rc == 0)
		FUZZ_ASSERT(same_set(&one, &before));
}

static void
check_app(const char *in, size_t len)
{
	char out[256 + FUZZ_GUARD], again[256], name[512];
	int rc;

	fuzz_guard_set(out, len);
	rc = ps_app_name_sanitize(in, out, len);
	FUZZ_ASSERT(rc == 0 || rc == 1);
	FUZZ_ASSERT(fuzz_guard_ok(out, len));
	FUZZ_ASSERT(strnlen(out, len) < len && out[0] != '\0');
	FUZZ_ASSERT(strspn(out, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			   "0123456789_./-") == strlen(out));
	if (rc == 0)
		FUZZ_ASSERT(in && !strcmp(in, out));
	FUZZ_ASSERT(ps_app_name_sanitize(out, again, sizeof(again)) == 0);
	FUZZ_ASSERT(!strcmp(out, again));
	rc = ps_tags_format_name(out, NULL, NULL, name, sizeof(name));
	FUZZ_ASSERT(rc == 0);
	FUZZ_ASSERT(!strncmp(name, out, strlen(out)) && !strcmp(name + strlen(out), "{}"));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ps_tags t, again;
	struct ps_report rep = { 0 };
	char *f[4];
	int rc;

	if (size < 1)
		return 0;
	fuzz_split(data + 1, size - 1, f, 4);
	memset(&t, 0, sizeof(t));
	rc = ps_tags_parse(&t, f[0], &rep);
	FUZZ_ASSERT(rc >= 0 && (unsigned)rc == t.n);
	check_set(&t, &rep);
	round_trip(&t, data[0] & 7);
	again = t;
	FUZZ_ASSERT(ps_tags_parse(&again, f[0], NULL) == 0);
	FUZZ_ASSERT(!memcmp(&again, &t, sizeof(t)));
	if (f[1] && f[2])
		check_add(&t, f[1], f[2]);
	check_set(&t, &rep);
	check_app(f[3], 8 + data[0] % 249);
	fuzz_free_all(f, 4);
	return 0;
}

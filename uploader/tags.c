/* tags.c -- tag sets, the application name and the /ingest series name.
 *
 * A tag list is split on ',' and each member on its first '='; nothing is
 * unescaped because the server has no escaping either.  Validation happens
 * once, on the way in (parse, add), so formatting is a plain copy.  Drops
 * are counted and the first few named in a fixed-size report, so that the
 * caller can warn once instead of once per tag.  See tags.h.
 */
#include "uploader/tags.h"
#include "common/text.h"

#include <errno.h>
#include <string.h>

static const char *const drop_words[] = {
	[PS_TAGS_DROP_SYNTAX] = "no '='",
	[PS_TAGS_DROP_BAD_NAME] = "bad name",
	[PS_TAGS_DROP_RESERVED] = "reserved name",
	[PS_TAGS_DROP_BAD_VALUE] = "bad value",
	[PS_TAGS_DROP_TOO_LONG] = "value too long",
	[PS_TAGS_DROP_DUPLICATE] = "duplicate",
	[PS_TAGS_DROP_FULL] = "too many tags",
};


static int
is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

/* 0 if the name is acceptable, else the reason to drop it. */
static int
check_name(const char *k, size_t n)
{
	size_t i;

	if (n == 0 || n > PS_TAGS_KEY_MAX)
		return PS_TAGS_DROP_BAD_NAME;
	for (i = 0; i < n; i++)
		if (!is_alnum(k[i]) && k[i] != '_' && k[i] != '.')
			return PS_TAGS_DROP_BAD_NAME;
	if (n >= 2 && k[0] == '_' && k[1] == '_')
		return PS_TAGS_DROP_RESERVED;
	return 0;
}

/* 0 if the value is acceptable, else the reason to drop it. */
static int
check_value(const char *v, size_t n)
{
	const unsigned char *s = (const unsigned char *)v;
	size_t i, step;

	if (n == 0 || ps_is_space(v[0]) || ps_is_space(v[n - 1]))
		return PS_TAGS_DROP_BAD_VALUE;
	if (n > PS_TAGS_VALUE_MAX)
		return PS_TAGS_DROP_TOO_LONG;
	for (i = 0; i < n; i += step) {
		if (s[i] < 0x20 || s[i] == 0x7f || strchr(",{}=", s[i]))
			return PS_TAGS_DROP_BAD_VALUE;
		step = ps_utf8_seq(v + i, n - i);
		if (!step)
			return PS_TAGS_DROP_BAD_VALUE;
	}
	return 0;
}

static int
find(const struct ps_tags *t, const char *k, size_t n)
{
	unsigned i;

	for (i = 0; i < t->n; i++)
		if (strlen(t->tag[i].key) == n && !memcmp(t->tag[i].key, k, n))
			return (int)i;
	return -1;
}

/* Validate and append; 0 if stored, else the reason it was not. */
static int
put(struct ps_tags *t, const char *k, size_t kn, const char *v, size_t vn)
{
	struct ps_tag *tag;
	int why;

	why = check_name(k, kn);
	if (!why)
		why = check_value(v, vn);
	if (!why && find(t, k, kn) >= 0)
		why = PS_TAGS_DROP_DUPLICATE;
	if (!why && t->n >= PS_TAGS_MAX)
		why = PS_TAGS_DROP_FULL;
	if (why)
		return why;
	tag = &t->tag[t->n++];
	memcpy(tag->key, k, kn);
	tag->key[kn] = '\0';
	memcpy(tag->value, v, vn);
	tag->value[vn] = '\0';
	return 0;
}

/* One member of a list, s[0..n).  Returns 1 if a tag was stored. */
static int
parse_member(struct ps_tags *t, const char *s, size_t n,
	     struct ps_report *rep)
{
	const char *eq, *v;
	size_t kn, vn;
	int why;

	ps_trim(&s, &n, ps_is_space);
	if (n == 0)
		return 0;
	eq = memchr(s, '=', n);
	if (!eq) {
		ps_report_drop(rep, PS_TAGS_DROP_SYNTAX, s, n);
		return 0;
	}
	kn = (size_t)(eq - s);
	v = eq + 1;
	vn = n - kn - 1;
	ps_trim(&s, &kn, ps_is_space);
	ps_trim(&v, &vn, ps_is_space);
	why = put(t, s, kn, v, vn);
	if (why) {
		ps_report_drop(rep, why, s, kn);
		return 0;
	}
	return 1;
}

int
ps_tags_parse(struct ps_tags *t, const char *spec, struct ps_report *rep)
{
	const char *end;
	int kept = 0;

	if (!t)
		return -EINVAL;
	if (!spec)
		return 0;
	for (;;) {
		end = strchr(spec, ',');
		if (!end)
			end = spec + strlen(spec);
		kept += parse_member(t, spec, (size_t)(end - spec), rep);
		if (!*end)
			return kept;
		spec = end + 1;
	}
}

int
ps_tags_add(struct ps_tags *t, const char *key, const char *value)
{
	size_t kn;
	int why;

	if (!t || !key || !value)
		return -EINVAL;
	kn = strlen(key);
	why = put(t, key, kn, value, strlen(value));
	switch (why) {
	case 0:
		return 0;
	case PS_TAGS_DROP_DUPLICATE:
		return 1;
	case PS_TAGS_DROP_FULL:
		return -ENOSPC;
	default:
		return -EINVAL;
	}
}

const char *
ps_tags_get(const struct ps_tags *t, const char *key)
{
	int i;

	if (!t || !key)
		return NULL;
	i = find(t, key, strlen(key));
	return i < 0 ? NULL : t->tag[i].value;
}

const char *
ps_tags_drop_str(enum ps_tags_drop why)
{
	if ((unsigned)why >= PS_ARRAY_LEN(drop_words) || !drop_words[why])
		return "dropped";
	return drop_words[why];
}

static int
is_app_char(char c)
{
	return is_alnum(c) || c == '_' || c == '.' || c == '/' || c == '-';
}

int
ps_app_name_sanitize(const char *in, char *out, size_t len)
{
	size_t n, i, o = 0;
	int changed, in_seq = 0;

	if (!out || len < 8)
		return -EINVAL;
	n = in ? strlen(in) : 0;
	changed = !in;
	i = n;
	ps_trim(&in, &n, ps_is_space);
	changed |= n != i;      /* whitespace trimmed */
	for (i = 0; i < n && o < len - 1; i++) {
		unsigned char c = (unsigned char)in[i];

		/* the rest of a UTF-8 sequence already replaced by one '_' */
		if ((c & 0xc0) == 0x80 && in_seq)
			continue;
		in_seq = c >= 0x80;
		out[o++] = is_app_char((char)c) ? (char)c : '_';
		changed |= out[o - 1] != (char)c;
	}
	changed |= i < n;
	out[o] = '\0';
	if (o == 0) {
		memcpy(out, "unknown", sizeof("unknown"));
		changed = 1;
	}
	return changed;
}

static int
is_app_name(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!is_app_char(*s))
			return 0;
	return 1;
}

/* Copy s at *pos; -ENOSPC if it and a NUL after it do not fit. */
static int
emit(char *buf, size_t len, size_t *pos, const char *s)
{
	size_t n = strlen(s);

	if (n >= len - *pos)
		return -ENOSPC;
	memcpy(buf + *pos, s, n + 1);
	*pos += n;
	return 0;
}

int
ps_tags_format_name(const char *app, const char *suffix,
		    const struct ps_tags *t, char *buf, size_t len)
{
	size_t pos = 0;
	unsigned i;
	int rc;

	if (!buf || len == 0)
		return -EINVAL;
	buf[0] = '\0';
	if (!app || !is_app_name(app) || (suffix && !is_app_name(suffix)))
		return -EINVAL;
	rc = emit(buf, len, &pos, app);
	if (!rc && suffix)
		rc = emit(buf, len, &pos, ".");
	if (!rc && suffix)
		rc = emit(buf, len, &pos, suffix);
	if (!rc)
		rc = emit(buf, len, &pos, "{");
	for (i = 0; !rc && t && i < t->n; i++) {
		rc = emit(buf, len, &pos, i ? "," : "");
		if (!rc)
			rc = emit(buf, len, &pos, t->tag[i].key);
		if (!rc)
			rc = emit(buf, len, &pos, "=");
		if (!rc)
			rc = emit(buf, len, &pos, t->tag[i].value);
	}
	if (!rc)
		rc = emit(buf, len, &pos, "}");
	if (rc)
		buf[0] = '\0';
	return rc;
}

/* tags.h -- profile tags (labels) and the application name.
 *
 * Pyroscope's /ingest takes the series identity as one query parameter,
 * `name=APP{k=v,k2=v2}`.  The server's parser has no escaping: a value ends
 * at ',' or '}', and a bad label name, a reserved name (`__` prefix) or a
 * duplicate makes it reject the whole profile.  So tags are validated here,
 * once, when the configuration is read; what does not pass is dropped and
 * reported, and what is stored can be formatted without further checks.
 *
 * Rules (the server's, made a little stricter so nothing it could refuse
 * ever leaves the process):
 *   name   [A-Za-z0-9_.]+, not starting with "__", at most PS_TAGS_KEY_MAX
 *          bytes (the server allows 1024);
 *   value  1..PS_TAGS_VALUE_MAX bytes (the server allows 2048) of valid
 *          UTF-8, none of `,{}=`, no control character (< 0x20, 0x7f),
 *          no leading or trailing space (the parser trims them; the
 *          server would too), inner spaces are kept;
 *   count  at most PS_TAGS_MAX tags; the first of two equal names wins.
 * Note: the server also counts the labels it adds itself (__name__,
 * service_name, pyroscope_spy, ...) against its own 30-label limit, so a
 * set close to PS_TAGS_MAX may still be refused by a default server.
 *
 * Everything here is allocation-free: a struct ps_tags keeps its strings in
 * fixed arrays inside itself (about 19 KiB), so it can be copied by value.
 */
#ifndef PS_TAGS_H
#define PS_TAGS_H

#include <stddef.h>
#include "common/ps.h"
#include "common/text.h"

#define PS_TAGS_MAX       30    /* tags per set */
#define PS_TAGS_KEY_MAX   128   /* bytes of a name, without the NUL */
#define PS_TAGS_VALUE_MAX 512   /* bytes of a value, without the NUL */

struct ps_tag {
	char key[PS_TAGS_KEY_MAX + 1];
	char value[PS_TAGS_VALUE_MAX + 1];
};

/* A zeroed struct is an empty set.  Tags stay in the order they were
 * added.  Owned by whoever declared it; modified only through the
 * functions below. */
struct ps_tags {
	unsigned n;                     /* tags used, <= PS_TAGS_MAX */
	struct ps_tag tag[PS_TAGS_MAX];
};

/* Why a member of a tag list was dropped. */
enum ps_tags_drop {
	PS_TAGS_DROP_SYNTAX = 1,        /* no '=' in the member */
	PS_TAGS_DROP_BAD_NAME,          /* empty, bad character or too long */
	PS_TAGS_DROP_RESERVED,          /* name starts with "__" */
	PS_TAGS_DROP_BAD_VALUE,         /* empty, `,{}=`, control char, bad UTF-8 */
	PS_TAGS_DROP_TOO_LONG,          /* value longer than PS_TAGS_VALUE_MAX */
	PS_TAGS_DROP_DUPLICATE,         /* name already present: first wins */
	PS_TAGS_DROP_FULL,              /* PS_TAGS_MAX tags already */
};

/* What ps_tags_parse() dropped, so that the caller can print one warning:
 * a struct ps_report (common/text.h), whose item[].why is an enum
 * ps_tags_drop and item[].name the member's name (or its start if it had
 * no '=').  A zeroed struct is an empty report. */

/* Parse a `k=v,k2=v2` list (PYROSCOPE_TAGS / PYROSCOPE_LABELS syntax) and
 * append its valid members to t, in order, under the rules above.  Empty
 * members (",,", a trailing ',') and blank specs are ignored silently;
 * every other member that is not kept is counted in rep (if rep is not
 * NULL) and, for the first PS_REPORT_ITEMS, listed.  Neither t nor rep
 * is reset: parsing two lists into the same set keeps the first list's
 * tags on a name clash.
 * Returns the number of tags appended (0 for a NULL or blank spec), or
 *  -EINVAL if t is NULL.
 * Context: any thread; does not allocate. */
int ps_tags_parse(struct ps_tags *t, const char *spec,
		  struct ps_report *rep) PS_WUR;

/* Append one tag unless a tag with that name is present already (it is
 * never overwritten).  key and value are used as given, not trimmed.
 * Returns 0 (added), 1 (name already present; t unchanged),
 *  -EINVAL  a NULL argument, or a name or value that breaks the rules,
 *  -ENOSPC  PS_TAGS_MAX tags already.
 * Context: any thread; does not allocate. */
int ps_tags_add(struct ps_tags *t, const char *key, const char *value) PS_WUR;

/* The value of tag `key`, or NULL.  The pointer is into t.
 * Context: any thread; async-signal-safe. */
const char *ps_tags_get(const struct ps_tags *t, const char *key);

/* A short English word for a drop reason ("bad name", ...), for warnings.
 * Never NULL.  Context: any thread. */
const char *ps_tags_drop_str(enum ps_tags_drop why);

/* Make an application name acceptable to the server: surrounding
 * whitespace is trimmed, every character outside [A-Za-z0-9_./-] becomes
 * '_' (one '_' per UTF-8 sequence), an empty result becomes "unknown", and
 * a name longer than len - 1 bytes is cut.  in may be NULL (as empty).
 * Returns 1 if out differs from in (the caller should warn once), 0 if in
 *  was used unchanged, -EINVAL if out is NULL or len < 8.
 * Context: any thread; does not allocate. */
int ps_app_name_sanitize(const char *in, char *out, size_t len) PS_WUR;

/* Format the /ingest series name `app{k=v,k2=v2}`, or with a suffix (the
 * folded-text profile type, e.g. "cpu") `app.suffix{k=v,...}`; tags in t's
 * order, `{}` when t is empty or NULL.  A service_name tag is passed like
 * any other (the server then uses it instead of app).  app and suffix must
 * already be sanitised: non-empty and made of [A-Za-z0-9_./-] only.
 * The result is not URL-encoded (see ps_ingest_url()).
 * Returns 0, -EINVAL (NULL buf/app, len 0, or app/suffix not sanitised) or
 *  -ENOSPC if the name and its NUL do not fit in len bytes; on failure buf
 *  holds "" (if len > 0).
 * Context: any thread; does not allocate. */
int ps_tags_format_name(const char *app, const char *suffix,
			const struct ps_tags *t, char *buf, size_t len) PS_WUR;

#endif

/* fuzz_headers.c -- libFuzzer target for ps_headers_parse_json()
 * (PYROSCOPE_HTTP_HEADERS, uploader/headers.c).
 *
 * Input: the variable's value.  Invariants, from headers.h:
 *   - -EINVAL leaves no headers and an empty report;
 *   - otherwise rc == h.n <= PS_HEADERS_MAX, and every line is
 *     "Name: value" inside h.text, Name an HTTP token not repeated
 *     (case-insensitive) and not Content-Type/-Length/Transfer-Encoding,
 *     value non-blank without control characters other than TAB;
 *   - ps_headers_line / ps_headers_vector agree with h;
 *   - round trip: the kept lines written back as JSON (values escaped as
 *     JSON requires) parse to the same lines with nothing dropped.
 */
#include <errno.h>
#include <strings.h>

#include "fuzz.h"
#include "uploader/headers.h"

static int
tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Check line i; return the length of its name. */
static size_t
check_line(const struct ps_headers *h, unsigned i)
{
	const char *l = ps_headers_line(h, i);
	size_t n, k, blank = 1;

	FUZZ_ASSERT(l && l >= h->text && l < h->text + sizeof(h->text));
	n = strnlen(l, (size_t)(h->text + sizeof(h->text) - l));
	FUZZ_ASSERT(l + n < h->text + sizeof(h->text));
	for (k = 0; k < n && l[k] != ':'; k++)
		FUZZ_ASSERT(tchar((unsigned char)l[k]));
	FUZZ_ASSERT(k > 0 && k + 2 < n && l[k] == ':' && l[k + 1] == ' ');
	for (size_t j = k + 2; j < n; j++) {
		unsigned char c = (unsigned char)l[j];

		FUZZ_ASSERT(c == '\t' || (c >= 0x20 && c != 0x7f));
		if (c != ' ' && c != '\t')
			blank = 0;
	}
	FUZZ_ASSERT(!blank);
	FUZZ_ASSERT(strncasecmp(l, "Content-Type:", 13) &&
		    strncasecmp(l, "Content-Length:", 15) &&
		    strncasecmp(l, "Transfer-Encoding:", 18));
	return k;
}

static void
check_unique(const struct ps_headers *h, const size_t *nlen)
{
	for (unsigned i = 0; i < h->n; i++)
		for (unsigned j = 0; j < i; j++)
			FUZZ_ASSERT(nlen[i] != nlen[j] ||
				    strncasecmp(ps_headers_line(h, i),
						ps_headers_line(h, j), nlen[i]));
}

/* {"Name":"value",...} with '"', '\\' and control bytes escaped. */
static char *
to_json(const struct ps_headers *h, const size_t *nlen)
{
	char *s = malloc(7 * sizeof(h->text) + 8), *p = s;

	if (!s)
		abort();
	*p++ = '{';
	for (unsigned i = 0; i < h->n; i++) {
		const unsigned char *l = (const unsigned char *)ps_headers_line(h, i);

		p += sprintf(p, "%s\"%.*s\":\"", i ? "," : "", (int)nlen[i], l);
		for (l += nlen[i] + 2; *l; l++) {
			if (*l == '"' || *l == '\\')
				p += sprintf(p, "\\%c", *l);
			else if (*l < 0x20)
				p += sprintf(p, "\\u%04x", *l);
			else
				*p++ = (char)*l;
		}
		*p++ = '"';
	}
	*p++ = '}';
	*p = '\0';
	return s;
}

static void
round_trip(const struct ps_headers *h, const size_t *nlen)
{
	static struct ps_headers back;
	struct ps_report rep;
	char *js = to_json(h, nlen);

	FUZZ_ASSERT(ps_headers_parse_json(js, &back, &rep) == (int)h->n);
	FUZZ_ASSERT(rep.dropped == 0);
	for (unsigned i = 0; i < h->n; i++)
		FUZZ_ASSERT(!strcmp(ps_headers_line(h, i), ps_headers_line(&back, i)));
	free(js);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ps_headers h;
	struct ps_report rep;
	const char *v[PS_HEADERS_MAX];
	size_t nlen[PS_HEADERS_MAX];
	char *s = fuzz_strdup(data, size);
	int rc;

	memset(&h, 0x5a, sizeof(h));
	memset(&rep, 0x5a, sizeof(rep));
	rc = ps_headers_parse_json(s, &h, &rep);
	if (rc == -EINVAL) {
		FUZZ_ASSERT(h.n == 0 && rep.dropped == 0 && rep.listed == 0);
		FUZZ_ASSERT(ps_headers_line(&h, 0) == NULL);
		free(s);
		return 0;
	}
	FUZZ_ASSERT(rc >= 0 && rc <= PS_HEADERS_MAX && (unsigned)rc == h.n);
	FUZZ_ASSERT(rep.listed <= PS_REPORT_ITEMS && rep.listed <= rep.dropped);
	for (unsigned i = 0; i < rep.listed; i++)
		FUZZ_ASSERT(strnlen(rep.item[i].name, PS_REPORT_NAME) <
			    PS_REPORT_NAME);
	for (unsigned i = 0; i < h.n; i++)
		nlen[i] = check_line(&h, i);
	FUZZ_ASSERT(ps_headers_line(&h, h.n) == NULL);
	FUZZ_ASSERT(ps_headers_vector(&h, v) == h.n);
	for (unsigned i = 0; i < h.n; i++)
		FUZZ_ASSERT(v[i] == ps_headers_line(&h, i));
	check_unique(&h, nlen);
	round_trip(&h, nlen);
	free(s);
	return 0;
}

/* text.c -- character classes and small parsers.  See text.h. */
#include "common/text.h"

#include <errno.h>
#include <string.h>

int
ps_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

PS_SIGSAFE size_t
ps_cat(char *dst, size_t len, size_t at, const char *src)
{
	size_t n = strlen(src), k;

	if (at < len) {
		k = n < len - at - 1 ? n : len - at - 1;
		memcpy(dst + at, src, k);
		dst[at + k] = '\0';
	}
	return at + n;
}

PS_SIGSAFE size_t
ps_cat_u(char *dst, size_t len, size_t at, unsigned long v)
{
	char d[24], *p = d + sizeof(d) - 1;

	*p = '\0';
	do
		*--p = (char)('0' + v % 10);
	while (v /= 10);
	return ps_cat(dst, len, at, p);
}

size_t
ps_cat_x64(char *dst, size_t len, size_t at, uint64_t v)
{
	char d[17];
	int i;

	for (i = 15; i >= 0; i--, v >>= 4)
		d[i] = "0123456789abcdef"[v & 15];
	d[16] = '\0';
	return ps_cat(dst, len, at, d);
}

int
ps_is_tchar(char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return 1;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

int
ps_is_ows(char c)
{
	return c == ' ' || c == '\t';
}

int
ps_is_space(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

void
ps_trim(const char **s, size_t *n, int (*is_ws)(char))
{
	while (*n && is_ws(**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n && is_ws((*s)[*n - 1]))
		(*n)--;
}

int
ps_pct_escapes_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] == '%' &&
		    (n - i < 3 || ps_hexval(s[i + 1]) < 0 || ps_hexval(s[i + 2]) < 0))
			return 0;
	return 1;
}

size_t
ps_utf8_seq(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len;
	unsigned cp, min;

	if (n == 0)
		return 0;
	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f, min = 0x80;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f, min = 0x800;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

void
ps_report_drop(struct ps_report *rep, int why, const char *name, size_t n)
{
	char *out;

	if (!rep)
		return;
	rep->dropped++;
	if (rep->listed >= PS_REPORT_ITEMS)
		return;
	rep->item[rep->listed].why = why;
	out = rep->item[rep->listed].name;
	if (n > PS_REPORT_NAME - 1)
		n = PS_REPORT_NAME - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = name[i] >= 0x20 && name[i] < 0x7f ? name[i] : '?';
	out[n] = '\0';
	rep->listed++;
}

long
ps_pct_decode(const char *s, size_t n, char *dst, size_t cap, int tab_ok)
{
	size_t o = 0;

	if (cap)
		dst[0] = '\0';
	if (!ps_pct_escapes_ok(s, n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '%') {
			c = (unsigned char)(ps_hexval(s[i + 1]) << 4 | ps_hexval(s[i + 2]));
			i += 2;
		}
		if ((c < 0x20 && !(tab_ok && c == '\t')) || c == 0x7f)
			return -EINVAL;
		if (o + 1 >= cap)
			return -ENOSPC;
		dst[o++] = (char)c;
		dst[o] = '\0';
	}
	return (long)o;
}

/* check_otlp.c -- OTLP encoding of the root span, checked by decoding the
 * bytes with protoc against an independent copy of the message definitions
 * (test/proto/otlp_trace_test.proto), and the OTEL_EXPORTER_OTLP_HEADERS
 * parser.  Run from the repository root (as `make unit` does). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uploader/otlp.h"

#define TEST_PROTO "test/proto/otlp_trace_test.proto"
#define DECODE_CMD "protoc --decode=opentelemetry.proto.collector.trace.v1." \
	"ExportTraceServiceRequest -I test/proto " TEST_PROTO

/* ---- helpers ---- */

/* Printable ids, so that protoc prints them verbatim. */
static void
make_span(struct ps_span *sp, int has_parent, int exit_code)
{
	memset(sp, 0, sizeof(*sp));
	memcpy(sp->trace_id, "TRACEID-16bytes!", 16);
	memcpy(sp->span_id, "SPANID-8", 8);
	if (has_parent) {
		memcpy(sp->parent_span_id, "PARENT-8", 8);
		sp->has_parent = 1;
		strcpy(sp->tracestate, "rojo=00f067aa0ba902b7");
	}
	sp->flags = 0x03;
	strcpy(sp->name, "generator.run");
	sp->start_ns = 1700000000123456789ull;
	sp->end_ns = 1700000005123456789ull;
	sp->exit_code = exit_code;
}

static const char *const test_argv[] = { "./gen", "--count=3", "two words" };

static struct ps_otlp_resource
make_res(void)
{
	return (struct ps_otlp_resource){
		.service_name = "interviewing-golang.generator",
		.pid = 4242,
		.executable_name = "gen",
		.argv = test_argv,
		.argc = 3,
	};
}

/* Collapse every run of whitespace to one space, in place. */
static void
squeeze(char *s)
{
	char *o = s;
	int space = 0;

	for (; *s; s++) {
		if (*s == ' ' || *s == '\n' || *s == '\t') {
			space = 1;
			continue;
		}
		if (space && o != s)
			*o++ = ' ';
		space = 0;
		*o++ = *s;
	}
	*o = '\0';
}

static void
write_file(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(p, 1, n, f), n);
	ck_assert_int_eq(fclose(f), 0);
}

/* Decode b with protoc; returns the text output, whitespace squeezed,
 * malloc'd. */
static char *
decode(const struct ps_buf *b)
{
	char path[] = "/tmp/check_otlp_XXXXXX";
	char cmd[512];
	size_t cap = 1 << 20, len = 0, r;
	char *text = malloc(cap);
	FILE *p;
	int fd;

	ck_assert_msg(access(TEST_PROTO, R_OK) == 0,
		      "run from the repository root: %s not found", TEST_PROTO);
	ck_assert_ptr_nonnull(text);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	write_file(path, b->data, b->len);
	snprintf(cmd, sizeof(cmd), DECODE_CMD " < %s 2>&1", path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while ((r = fread(text + len, 1, cap - 1 - len, p)) > 0)
		len += r;
	text[len] = '\0';
	ck_assert_msg(pclose(p) == 0, "protoc failed: %s", text);
	unlink(path);
	squeeze(text);
	return text;
}

#define ck_assert_has(text, needle) \
	ck_assert_msg(strstr((text), (needle)) != NULL, \
		      "missing \"%s\" in: %s", (needle), (text))
#define ck_assert_lacks(text, needle) \
	ck_assert_msg(strstr((text), (needle)) == NULL, \
		      "unexpected \"%s\" in: %s", (needle), (text))

static int
count(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

/* ---- encoding ---- */

START_TEST(otlp_encodes_joined_span_with_error_status)
{
	struct ps_buf b = PS_BUF_INIT(1 << 16);
	struct ps_span sp;
	struct ps_otlp_resource res = make_res();
	char *t;

	make_span(&sp, 1, 3);
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), 0);
	t = decode(&b);
	ck_assert_has(t, "resource_spans { resource { attributes { "
		      "key: \"service.name\" value { string_value: "
		      "\"interviewing-golang.generator\" } } }");
	ck_assert_has(t, "scope { name: \"pyroshim\" version: \""
		      PS_VERSION "\" }");
	ck_assert_has(t, "spans { trace_id: \"TRACEID-16bytes!\" "
		      "span_id: \"SPANID-8\" "
		      "trace_state: \"rojo=00f067aa0ba902b7\" "
		      "parent_span_id: \"PARENT-8\" name: \"generator.run\" "
		      "kind: SPAN_KIND_INTERNAL "
		      "start_time_unix_nano: 1700000000123456789 "
		      "end_time_unix_nano: 1700000005123456789 ");
	ck_assert_has(t, "key: \"process.pid\" value { int_value: 4242 }");
	ck_assert_has(t, "key: \"process.executable.name\" value { "
		      "string_value: \"gen\" }");
	ck_assert_has(t, "key: \"process.command_args\" value { array_value { "
		      "values { string_value: \"./gen\" } "
		      "values { string_value: \"--count=3\" } "
		      "values { string_value: \"two words\" } } }");
	ck_assert_has(t, "key: \"process.exit.code\" value { int_value: 3 }");
	/* "SPANID-8" in hex */
	ck_assert_has(t, "key: \"pyroscope.profile.id\" value { "
		      "string_value: \"5350414e49442d38\" }");
	ck_assert_has(t, "status { message: \"exit code 3\" "
		      "code: STATUS_CODE_ERROR }");
	/* 0x03 | HAS_IS_REMOTE 0x100 | IS_REMOTE 0x200 */
	ck_assert_has(t, "flags: 771");
	free(t);
	ps_buf_free(&b);
}
END_TEST

START_TEST(otlp_root_span_omits_parent_state_and_status)
{
	struct ps_buf b = PS_BUF_INIT(1 << 16);
	struct ps_span sp;
	struct ps_otlp_resource res = make_res();
	char *t;

	make_span(&sp, 0, 0);
	res.executable_name = NULL;
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), 0);
	t = decode(&b);
	ck_assert_has(t, "span_id: \"SPANID-8\" name: \"generator.run\"");
	ck_assert_lacks(t, "parent_span_id");
	ck_assert_lacks(t, "trace_state");
	ck_assert_lacks(t, "status");
	ck_assert_lacks(t, "process.executable.name");
	ck_assert_has(t, "key: \"process.exit.code\" value { int_value: 0 }");
	ck_assert_has(t, "flags: 259");
	free(t);
	ps_buf_free(&b);
}
END_TEST

START_TEST(otlp_negative_exit_code_is_an_error)
{
	struct ps_buf b = PS_BUF_INIT(1 << 16);
	struct ps_span sp;
	struct ps_otlp_resource res = make_res();
	char *t;

	make_span(&sp, 0, -9);
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), 0);
	t = decode(&b);
	ck_assert_has(t, "key: \"process.exit.code\" value { int_value: -9 }");
	ck_assert_has(t, "status { message: \"exit code -9\" "
		      "code: STATUS_CODE_ERROR }");
	free(t);
	ps_buf_free(&b);
}
END_TEST

START_TEST(otlp_encodes_every_argument_untruncated)
{
	enum { N = 2000 };
	static const char *argv[N];
	static char long_arg[5000];
	struct ps_buf b = PS_BUF_INIT(1 << 20);
	struct ps_span sp;
	struct ps_otlp_resource res = make_res();
	char *t;

	memset(long_arg, 'z', sizeof(long_arg) - 1);
	for (int i = 0; i < N; i++)
		argv[i] = "arg";
	argv[N - 1] = long_arg;
	res.argv = argv;
	res.argc = N;
	make_span(&sp, 0, 0);
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), 0);
	t = decode(&b);
	ck_assert_int_eq(count(t, "values { string_value: \"arg\" }"), N - 1);
	ck_assert_int_eq(count(t, long_arg), 1);
	free(t);
	ps_buf_free(&b);
}
END_TEST

START_TEST(otlp_empty_argv_encodes_empty_array)
{
	struct ps_buf b = PS_BUF_INIT(1 << 16);
	struct ps_span sp;
	struct ps_otlp_resource res = make_res();
	char *t;

	res.argv = NULL;
	res.argc = 0;
	make_span(&sp, 0, 0);
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), 0);
	t = decode(&b);
	ck_assert_has(t, "key: \"process.command_args\" value { "
		      "array_value { } }");
	free(t);
	ps_buf_free(&b);
}
END_TEST

START_TEST(otlp_fails_with_e2big_and_restores_buffer)
{
	struct ps_buf b = PS_BUF_INIT(100);
	struct ps_span sp;
	struct ps_otlp_resource res = make_res();

	make_span(&sp, 1, 1);
	ck_assert_int_eq(ps_buf_append(&b, "keep", 4), 0);
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), -E2BIG);
	ck_assert_uint_eq(b.len, 4);
	ck_assert_mem_eq(b.data, "keep", 4);
	ps_buf_free(&b);
}
END_TEST

START_TEST(otlp_appends_after_existing_bytes)
{
	struct ps_buf a = PS_BUF_INIT(1 << 16), b = PS_BUF_INIT(1 << 16);
	struct ps_span sp;
	struct ps_otlp_resource res = make_res();

	make_span(&sp, 1, 0);
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &a), 0);
	ck_assert_int_eq(ps_buf_append(&b, "xy", 2), 0);
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), 0);
	ck_assert_uint_eq(b.len, a.len + 2);
	ck_assert_mem_eq(b.data + 2, a.data, a.len);
	ps_buf_free(&a);
	ps_buf_free(&b);
}
END_TEST

START_TEST(otlp_rejects_invalid_arguments)
{
	struct ps_buf b = PS_BUF_INIT(1 << 16);
	struct ps_span sp;
	struct ps_otlp_resource res = make_res();
	const char *holes[] = { "a", NULL };

	make_span(&sp, 0, 0);
	ck_assert_int_eq(ps_otlp_encode_span(NULL, &res, &b), -EINVAL);
	ck_assert_int_eq(ps_otlp_encode_span(&sp, NULL, &b), -EINVAL);
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, NULL), -EINVAL);
	res.service_name = "";
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), -EINVAL);
	res = make_res();
	res.argc = -1;
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), -EINVAL);
	res.argv = holes;
	res.argc = 2;
	ck_assert_int_eq(ps_otlp_encode_span(&sp, &res, &b), -EINVAL);
	ck_assert_uint_eq(b.len, 0);
	ps_buf_free(&b);
}
END_TEST

/* ---- OTEL_EXPORTER_OTLP_HEADERS ---- */

START_TEST(headers_parse_trim_and_percent_decode)
{
	struct ps_otlp_header h[4];
	char store[128];
	size_t n = 99;
	const char *s = " api-key = secret%20value ,"
			"Authorization=Basic%20dXNlcjpwYXNz,x=a=b%2C+c%3d";

	ck_assert_int_eq(ps_otlp_parse_headers(s, h, 4, &n, store,
					       sizeof(store)), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(h[0].name, "api-key");
	ck_assert_str_eq(h[0].value, "secret value");
	ck_assert_str_eq(h[1].name, "Authorization");
	ck_assert_str_eq(h[1].value, "Basic dXNlcjpwYXNz");
	ck_assert_str_eq(h[2].name, "x");
	ck_assert_str_eq(h[2].value, "a=b,+c=");
}
END_TEST

START_TEST(headers_skip_and_count_bad_members)
{
	struct ps_otlp_header h[8];
	char store[256];
	size_t n;
	const char *s = "novalue,=x,bad key=1,k=%zz,k2=%0D%0Ainjected,"
			"k3=,k4=%4,k5=%,ok=1,k\xc3\xa9=2,k6=a\x01";

	ck_assert_int_eq(ps_otlp_parse_headers(s, h, 8, &n, store,
					       sizeof(store)), 10);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(h[0].name, "ok");
	ck_assert_str_eq(h[0].value, "1");
}
END_TEST

START_TEST(headers_ignore_empty_members)
{
	struct ps_otlp_header h[4];
	char store[64];
	size_t n;

	ck_assert_int_eq(ps_otlp_parse_headers(",a=1,, \t ,b=2,", h, 4, &n,
					       store, sizeof(store)), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(h[1].name, "b");
	ck_assert_int_eq(ps_otlp_parse_headers("", h, 4, &n, store,
					       sizeof(store)), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(ps_otlp_parse_headers(NULL, h, 4, &n, store,
					       sizeof(store)), 0);
	ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(headers_count_members_over_capacity)
{
	struct ps_otlp_header h[2];
	char store[64], tiny[6];
	size_t n;

	ck_assert_int_eq(ps_otlp_parse_headers("a=1,b=2,c=3", h, 2, &n, store,
					       sizeof(store)), 1);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(h[1].value, "2");
	/* "a=1" needs 4 bytes of storage, then "bb=2" needs 5 of the 2 left */
	ck_assert_int_eq(ps_otlp_parse_headers("a=1,bb=2", h, 2, &n, tiny,
					       sizeof(tiny)), 1);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(h[0].name, "a");
}
END_TEST

START_TEST(headers_fit_in_strlen_plus_one)
{
	struct ps_otlp_header h[4];
	const char *s = "a=1,b=2,c=3";
	char store[12];         /* strlen(s) + 1 */
	size_t n;

	ck_assert_int_eq(ps_otlp_parse_headers(s, h, 4, &n, store,
					       strlen(s) + 1), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(h[2].name, "c");
	ck_assert_str_eq(h[2].value, "3");
	ck_assert_int_eq(ps_otlp_parse_headers(s, h, 4, NULL, store,
					       sizeof(store)), -EINVAL);
	ck_assert_int_eq(ps_otlp_parse_headers(s, NULL, 4, &n, store,
					       sizeof(store)), -EINVAL);
}
END_TEST

static Suite *
otlp_suite(void)
{
	Suite *s = suite_create("otlp");
	TCase *enc = tcase_create("encode");
	TCase *hdr = tcase_create("headers");

	/* protoc start-up on a busy machine: be generous */
	tcase_set_timeout(enc, 120);
	tcase_add_test(enc, otlp_encodes_joined_span_with_error_status);
	tcase_add_test(enc, otlp_root_span_omits_parent_state_and_status);
	tcase_add_test(enc, otlp_negative_exit_code_is_an_error);
	tcase_add_test(enc, otlp_encodes_every_argument_untruncated);
	tcase_add_test(enc, otlp_empty_argv_encodes_empty_array);
	tcase_add_test(enc, otlp_fails_with_e2big_and_restores_buffer);
	tcase_add_test(enc, otlp_appends_after_existing_bytes);
	tcase_add_test(enc, otlp_rejects_invalid_arguments);
	suite_add_tcase(s, enc);

	tcase_add_test(hdr, headers_parse_trim_and_percent_decode);
	tcase_add_test(hdr, headers_skip_and_count_bad_members);
	tcase_add_test(hdr, headers_ignore_empty_members);
	tcase_add_test(hdr, headers_count_members_over_capacity);
	tcase_add_test(hdr, headers_fit_in_strlen_plus_one);
	suite_add_tcase(s, hdr);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(otlp_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

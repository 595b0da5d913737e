/* check_ingest.c -- server address splitting, the /ingest query string and
 * the multipart body.
 *
 * The multipart body is checked independently of the code that wrote it:
 * python3's email package parses it (with the Content-Type header put in
 * front) and writes each part to a file, which the test compares with what
 * went in.
 */
#include "uploader/ingest.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* --- ps_ingest_split_url ------------------------------------------------ */

static char base[128], user[32], pass[32];

static int
split(const char *server)
{
	memset(base, 'X', sizeof(base));
	memset(user, 'X', sizeof(user));
	memset(pass, 'X', sizeof(pass));
	return ps_ingest_split_url(server, base, sizeof(base), user,
				   sizeof(user), pass, sizeof(pass));
}

static void
split_ok(const char *server, const char *b, const char *u, const char *p)
{
	ck_assert_msg(split(server) == 0, "refused: %s", server);
	ck_assert_str_eq(base, b);
	ck_assert_str_eq(user, u);
	ck_assert_str_eq(pass, p);
}

static void
split_bad(const char *server)
{
	ck_assert_msg(split(server) == -EINVAL, "accepted: %s", server);
	ck_assert_str_eq(base, "");
	ck_assert_str_eq(user, "");
	ck_assert_str_eq(pass, "");
}

START_TEST(split_url_accepts_host_port_and_prefix)
{
	split_ok("http://localhost:4040", "http://localhost:4040", "", "");
	split_ok("http://localhost:4040/", "http://localhost:4040", "", "");
	split_ok("https://profiles.example.com/pyroscope/",
		 "https://profiles.example.com/pyroscope", "", "");
	split_ok("https://h/a/b//", "https://h/a/b", "", "");
	split_ok("HTTPS://Host.Example", "https://Host.Example", "", "");
	split_ok("http://[::1]:4040/x", "http://[::1]:4040/x", "", "");
	split_ok("http://h/p%20q", "http://h/p%20q", "", "");
}
END_TEST

START_TEST(split_url_moves_userinfo_to_credentials)
{
	split_ok("https://123456:glc_abc@prof.grafana.net",
		 "https://prof.grafana.net", "123456", "glc_abc");
	split_ok("http://us%40er:p%3As%2Fs@h:80/pre/",
		 "http://h:80/pre", "us@er", "p:s/s");
	split_ok("http://only@h", "http://h", "only", "");
	split_ok("http://u:@h", "http://h", "u", "");
	/* the last '@' of the authority ends the userinfo */
	split_ok("http://u:p@ss@h", "http://h", "u", "p@ss");
}
END_TEST

START_TEST(split_url_rejects_other_schemes_and_malformed_addresses)
{
	split_bad("ftp://h");
	split_bad("localhost:4040");
	split_bad("http:/h");
	split_bad("file:///etc/passwd");
	split_bad("");
	split_bad("http://");
	split_bad("http:///path");
	split_bad("http://:4040");
	split_bad("http://u:p@/x");
	split_bad("http://h:0");
	split_bad("http://h:65536");
	split_bad("http://h:");
	split_bad("http://h:80x");
	split_bad("http://h!/");
	split_bad("http://[::1");
	split_bad("http://[]:80");
}
END_TEST

START_TEST(split_url_rejects_spaces_controls_queries_and_bad_escapes)
{
	split_bad("http://h /x");
	split_bad(" http://h");
	split_bad("http://h/x\n");
	split_bad("http://h/\tx");
	split_bad("http://h/caf\xc3\xa9");
	split_bad("http://h/?a=b");
	split_bad("http://h#frag");
	split_bad("http://u%zz@h");
	split_bad("http://u%4@h");
	split_bad("http://h/x%");
	split_bad("http://u%0ax@h");    /* a newline hidden in a credential */
	split_bad("http://u:%00@h");
}
END_TEST

START_TEST(split_url_reports_small_buffers)
{
	char b[16], u[4], p[4];

	ck_assert_int_eq(ps_ingest_split_url("http://a-long-host-name", b,
					     sizeof(b), u, sizeof(u), p,
					     sizeof(p)), -ENOSPC);
	ck_assert_str_eq(b, "");
	ck_assert_int_eq(ps_ingest_split_url("http://user@h", b, sizeof(b), u,
					     sizeof(u), p, sizeof(p)), -ENOSPC);
	ck_assert_str_eq(u, "");
	ck_assert_int_eq(ps_ingest_split_url("http://usr@h", b, sizeof(b), u,
					     sizeof(u), p, sizeof(p)), 0);
	ck_assert_str_eq(u, "usr");
	ck_assert_int_eq(ps_ingest_split_url(NULL, b, sizeof(b), u, sizeof(u),
					     p, sizeof(p)), -EINVAL);
	ck_assert_int_eq(ps_ingest_split_url("http://h", b, sizeof(b), NULL, 0,
					     p, sizeof(p)), -EINVAL);
}
END_TEST

/* --- ps_ingest_url ------------------------------------------------------ */

static struct ps_buf ub;

static void
url_setup(void)
{
	struct ps_buf fresh = PS_BUF_INIT(1 << 16);

	ub = fresh;
}

static void
url_teardown(void)
{
	ps_buf_free(&ub);
}

static const char *
url_str(void)
{
	ck_assert_ptr_nonnull(ub.data);
	ck_assert_int_eq(ub.data[ub.len], '\0');
	ck_assert_uint_eq(strlen((char *)ub.data), ub.len);
	return (const char *)ub.data;
}

START_TEST(url_encodes_every_parameter)
{
	struct ps_ingest_query q = {
		.name = "app{env=dev,team=core infra}",
		.from_ns = 1700000000123456789ULL,
		.until_ns = 1700000010123456789ULL,
		.spy_name = "pyroshim",
		.sample_rate = 100,
		.units = "samples",
		.aggregation = "sum",
	};

	ck_assert_int_eq(ps_ingest_url("http://h:4040/p", &q, &ub), 0);
	ck_assert_str_eq(url_str(),
		"http://h:4040/p/ingest?name=app%7Benv%3Ddev%2Cteam%3Dcore%20infra%7D"
		"&from=1700000000123456789&until=1700000010123456789"
		"&spyName=pyroshim&sampleRate=100&units=samples"
		"&aggregationType=sum");
}
END_TEST

START_TEST(url_encodes_non_ascii_and_reserved_bytes)
{
	struct ps_ingest_query q = {
		.name = "a.cpu{k=caf\xc3\xa9/x?y&z#~-_.}",
		.format = "folded",
	};

	ck_assert_int_eq(ps_ingest_url("https://h", &q, &ub), 0);
	ck_assert_str_eq(url_str(),
		"https://h/ingest?name=a.cpu%7Bk%3Dcaf%C3%A9%2Fx%3Fy%26z%23~-_.%7D"
		"&format=folded");
}
END_TEST

START_TEST(url_writes_times_as_19_digits)
{
	struct ps_ingest_query q = {
		.name = "a{}", .from_ns = 1, .until_ns = 999999999999999999ULL,
	};

	ck_assert_int_eq(ps_ingest_url("http://h", &q, &ub), 0);
	ck_assert_str_eq(url_str(), "http://h/ingest?name=a%7B%7D"
			 "&from=0000000000000000001&until=0999999999999999999");
	ps_buf_reset(&ub);
	q.from_ns = 9999999999999999999ULL;
	q.until_ns = 0;
	ck_assert_int_eq(ps_ingest_url("http://h", &q, &ub), 0);
	ck_assert_str_eq(url_str(), "http://h/ingest?name=a%7B%7D"
			 "&from=9999999999999999999");
}
END_TEST

START_TEST(url_rejects_bad_queries_and_leaves_buffer_unchanged)
{
	struct ps_ingest_query q = { .name = "a{}", .from_ns = 20, .until_ns = 10 };

	ck_assert_int_eq(ps_buf_puts(&ub, "keep"), 0);
	ck_assert_int_eq(ps_ingest_url("http://h", &q, &ub), -EINVAL);
	q.from_ns = 10000000000000000000ULL;
	q.until_ns = 0;
	ck_assert_int_eq(ps_ingest_url("http://h", &q, &ub), -ERANGE);
	q.from_ns = 0;
	ck_assert_int_eq(ps_ingest_url("", &q, &ub), -EINVAL);
	ck_assert_int_eq(ps_ingest_url(NULL, &q, &ub), -EINVAL);
	q.name = "";
	ck_assert_int_eq(ps_ingest_url("http://h", &q, &ub), -EINVAL);
	ck_assert_int_eq(ps_ingest_url("http://h", NULL, &ub), -EINVAL);
	ck_assert_uint_eq(ub.len, 4);
}
END_TEST

START_TEST(url_restores_length_when_the_cap_is_hit)
{
	struct ps_buf small = PS_BUF_INIT(40);
	struct ps_ingest_query q = { .name = "app{env=dev}", .units = "bytes" };

	ck_assert_int_eq(ps_buf_puts(&small, "x"), 0);
	ck_assert_int_eq(ps_ingest_url("http://host.example", &q, &small), -E2BIG);
	ck_assert_uint_eq(small.len, 1);
	ps_buf_free(&small);
}
END_TEST

/* --- ps_ingest_multipart ------------------------------------------------ */

static const char mp_script[] =
	"import sys, os, email.parser, email.policy\n"
	"raw = open(sys.argv[1], 'rb').read()\n"
	"msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)\n"
	"assert msg.is_multipart()\n"
	"out = open(os.path.join(sys.argv[2], 'parts'), 'w')\n"
	"defects = len(msg.defects)\n"
	"for p in msg.iter_parts():\n"
	"    name = p.get_param('name', header='content-disposition')\n"
	"    data = p.get_payload(decode=True)\n"
	"    open(os.path.join(sys.argv[2], 'part.' + name), 'wb').write(data)\n"
	"    out.write('%s %s %s\\n' % (name, p.get_filename(), p.get_content_type()))\n"
	"    defects += len(p.defects)\n"
	"out.write('defects %d\\n' % defects)\n";

static char tmpdir[64];
static struct ps_buf body;

static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(path);
}

static void
mp_setup(void)
{
	struct ps_buf fresh = PS_BUF_INIT(1 << 20);

	body = fresh;
	strcpy(tmpdir, "/tmp/check_ingest.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ps_ingest_set_random(NULL);
}

static void
mp_teardown(void)
{
	ps_buf_free(&body);
	nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
	ps_ingest_set_random(NULL);
}

static void
write_file(const char *path, const void *a, size_t an, const void *b, size_t bn)
{
	FILE *f = fopen(path, "wb");

	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(a, 1, an, f), an);
	if (bn)
		ck_assert_uint_eq(fwrite(b, 1, bn, f), bn);
	ck_assert_int_eq(fclose(f), 0);
}

/* Read tmpdir/name into buf; returns its length. */
static size_t
read_file(const char *name, void *buf, size_t cap)
{
	char path[128];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "python wrote no %s", name);
	n = fread(buf, 1, cap, f);
	fclose(f);
	return n;
}

/* Hand `Content-Type: ct` + body to python's email parser. */
static void
python_parse(const char *ct)
{
	char hdr[256], path[128];
	pid_t pid;
	int st;

	snprintf(hdr, sizeof(hdr), "Content-Type: %s\r\n\r\n", ct);
	snprintf(path, sizeof(path), "%s/request", tmpdir);
	write_file(path, hdr, strlen(hdr), body.data, body.len);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execlp("python3", "python3", "-c", mp_script, path, tmpdir,
		       (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		      "python3 could not parse the body");
}

/* Profile-like bytes with everything a naive parser trips on. */
static size_t
sample_data(unsigned char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + (i >> 8));
	memcpy(p, "\x1f\x8b\x08\x00", 4);
	memcpy(p + 100, "\r\n--\r\n\r\n--x--\r\n", 15);
	return n;
}

START_TEST(multipart_profile_part_round_trips_through_python)
{
	static unsigned char data[70000], back[70000];
	char ct[128], parts[512];
	size_t n = sample_data(data, sizeof(data)), got;

	ck_assert_int_eq(ps_ingest_multipart(data, n, NULL, &body, ct,
					     sizeof(ct)), 0);
	ck_assert_int_eq(strncmp(ct, "multipart/form-data; boundary=", 30), 0);
	ck_assert_uint_eq(strlen(ct), 30 + 32);
	python_parse(ct);
	got = read_file("part.profile", back, sizeof(back));
	ck_assert_uint_eq(got, n);
	ck_assert_mem_eq(back, data, n);
	got = read_file("parts", parts, sizeof(parts) - 1);
	parts[got] = '\0';
	ck_assert_str_eq(parts, "profile profile.pprof application/octet-stream\n"
			 "defects 0\n");
}
END_TEST

START_TEST(multipart_includes_sample_type_config_when_given)
{
	static const char json[] =
		"{\"alloc_space\":{\"units\":\"bytes\",\"aggregation\":\"sum\"}}";
	unsigned char data[300], back[400];
	char ct[128], parts[512];
	size_t n = sample_data(data, sizeof(data)), got;

	ck_assert_int_eq(ps_ingest_multipart(data, n, json, &body, ct,
					     sizeof(ct)), 0);
	python_parse(ct);
	got = read_file("part.profile", back, sizeof(back));
	ck_assert_uint_eq(got, n);
	ck_assert_mem_eq(back, data, n);
	got = read_file("part.sample_type_config", back, sizeof(back));
	ck_assert_uint_eq(got, strlen(json));
	ck_assert_mem_eq(back, json, got);
	got = read_file("parts", parts, sizeof(parts) - 1);
	parts[got] = '\0';
	ck_assert_str_eq(parts,
		"profile profile.pprof application/octet-stream\n"
		"sample_type_config sample_type_config.json application/octet-stream\n"
		"defects 0\n");
}
END_TEST

static int fill_calls;

/* First call: bytes 00 01 .. 0f; later calls: ff fe .. f0. */
static int
fake_fill(void *p, size_t n)
{
	unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (unsigned char)(fill_calls ? 0xff - i : i);
	fill_calls++;
	return 0;
}

static int
stuck_fill(void *p, size_t n)
{
	memset(p, 0xab, n);
	return 0;
}

static int
failing_fill(void *p, size_t n)
{
	(void)p, (void)n;
	return -1;
}

START_TEST(multipart_draws_a_new_boundary_when_data_contains_it)
{
	static const char first[] = "000102030405060708090a0b0c0d0e0f";
	char data[100], ct[128];

	snprintf(data, sizeof(data), "xx--%s--yy", first);
	fill_calls = 0;
	ps_ingest_set_random(fake_fill);
	ck_assert_int_eq(ps_ingest_multipart(data, strlen(data), NULL, &body,
					     ct, sizeof(ct)), 0);
	ck_assert_int_eq(fill_calls, 2);
	ck_assert_str_eq(ct, "multipart/form-data; boundary="
			 "fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0");
	python_parse(ct);
}
END_TEST

START_TEST(multipart_boundary_also_avoids_the_config_text)
{
	static const char first[] = "000102030405060708090a0b0c0d0e0f";
	char json[64], ct[128];

	snprintf(json, sizeof(json), "{\"%s\":{}}", first);
	fill_calls = 0;
	ps_ingest_set_random(fake_fill);
	ck_assert_int_eq(ps_ingest_multipart("abc", 3, json, &body, ct,
					     sizeof(ct)), 0);
	ck_assert_int_eq(fill_calls, 2);
}
END_TEST

START_TEST(multipart_gives_up_when_every_boundary_collides)
{
	char data[64], ct[128] = "untouched";

	memset(data, 'a', 30);
	strcpy(data + 30, "abababababababababababababababab");
	ps_ingest_set_random(stuck_fill);
	ck_assert_int_eq(ps_buf_puts(&body, "keep"), 0);
	ck_assert_int_eq(ps_ingest_multipart(data, strlen(data), NULL, &body,
					     ct, sizeof(ct)), -EAGAIN);
	ck_assert_uint_eq(body.len, 4);
	ck_assert_str_eq(ct, "untouched");
}
END_TEST

START_TEST(multipart_falls_back_when_randomness_fails)
{
	char ct1[128], ct2[128];

	ps_ingest_set_random(failing_fill);
	ck_assert_int_eq(ps_ingest_multipart("abc", 3, NULL, &body, ct1,
					     sizeof(ct1)), 0);
	ck_assert_int_eq(ps_ingest_multipart("abc", 3, NULL, &body, ct2,
					     sizeof(ct2)), 0);
	ck_assert_uint_eq(strlen(ct1), 62);
	ck_assert_uint_eq(strspn(ct1 + 30, "0123456789abcdef"), 32);
	ck_assert_str_ne(ct1, ct2);
}
END_TEST

START_TEST(multipart_checks_arguments_and_restores_on_cap)
{
	struct ps_buf small = PS_BUF_INIT(200);
	char data[300] = { 0 }, ct[128];

	ck_assert_int_eq(ps_ingest_multipart(NULL, 3, NULL, &body, ct, 128), -EINVAL);
	ck_assert_int_eq(ps_ingest_multipart("a", 0, NULL, &body, ct, 128), -EINVAL);
	ck_assert_int_eq(ps_ingest_multipart("a", 1, NULL, NULL, ct, 128), -EINVAL);
	ck_assert_int_eq(ps_ingest_multipart("a", 1, NULL, &body, ct, 62), -ENOSPC);
	ck_assert_int_eq(ps_ingest_multipart("a", 1, NULL, &body, ct, 63), 0);
	ck_assert_int_eq(ps_buf_puts(&small, "x"), 0);
	ck_assert_int_eq(ps_ingest_multipart(data, sizeof(data), NULL, &small,
					     ct, sizeof(ct)), -E2BIG);
	ck_assert_uint_eq(small.len, 1);
	ps_buf_free(&small);
}
END_TEST

static Suite *
ingest_suite(void)
{
	Suite *s = suite_create("ingest");
	TCase *tc;

	tc = tcase_create("split_url");
	tcase_add_test(tc, split_url_accepts_host_port_and_prefix);
	tcase_add_test(tc, split_url_moves_userinfo_to_credentials);
	tcase_add_test(tc, split_url_rejects_other_schemes_and_malformed_addresses);
	tcase_add_test(tc, split_url_rejects_spaces_controls_queries_and_bad_escapes);
	tcase_add_test(tc, split_url_reports_small_buffers);
	suite_add_tcase(s, tc);

	tc = tcase_create("url");
	tcase_add_checked_fixture(tc, url_setup, url_teardown);
	tcase_add_test(tc, url_encodes_every_parameter);
	tcase_add_test(tc, url_encodes_non_ascii_and_reserved_bytes);
	tcase_add_test(tc, url_writes_times_as_19_digits);
	tcase_add_test(tc, url_rejects_bad_queries_and_leaves_buffer_unchanged);
	tcase_add_test(tc, url_restores_length_when_the_cap_is_hit);
	suite_add_tcase(s, tc);

	tc = tcase_create("multipart");
	tcase_add_checked_fixture(tc, mp_setup, mp_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, multipart_profile_part_round_trips_through_python);
	tcase_add_test(tc, multipart_includes_sample_type_config_when_given);
	tcase_add_test(tc, multipart_draws_a_new_boundary_when_data_contains_it);
	tcase_add_test(tc, multipart_boundary_also_avoids_the_config_text);
	tcase_add_test(tc, multipart_gives_up_when_every_boundary_collides);
	tcase_add_test(tc, multipart_falls_back_when_randomness_fails);
	tcase_add_test(tc, multipart_checks_arguments_and_restores_on_cap);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(ingest_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

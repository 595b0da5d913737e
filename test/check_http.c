/* check_http.c -- ps_http_post against the loopback Pyroscope peer.
 *
 * Each test starts test/peer/pyroscope_peer.py with the fault or auth
 * options it needs, talks to it over 127.0.0.1 and reads back what the peer
 * saved.  The peer cannot outlive the test: teardown kills it, it gets
 * SIGTERM when the forked test process dies (PR_SET_PDEATHSIG), and it exits
 * by itself after --max-seconds.  Run from the repository root.
 */
#include "uploader/http.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PEER_SCRIPT "test/peer/pyroscope_peer.py"
#define PEER_START_WAIT_MS 15000
#define MAX_PEER_ARGS 16

/* Set by main() before forking the tests; removed by main() at the end,
 * so a test that fails (and skips its teardown) leaves nothing behind. */
static char root[64];

static struct {
	pid_t pid;              /* 0 when no peer runs */
	int port;
	char tmp[128];          /* this test's directory under root */
	char dir[160];          /* the peer's --dir */
} peer;

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Read a whole file; NULL if absent.  *len gets its size. */
static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *p;
	long n;

	if (!f)
		return NULL;
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	p = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	p[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return p;
}

static char *
peer_file(const char *name, size_t *len)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", peer.dir, name);
	return slurp(path, len);
}

static void
exec_peer(const char *const *extra, const char *port_file)
{
	const char *argv[MAX_PEER_ARGS + 10] = {
		"python3", PEER_SCRIPT, "--dir", peer.dir,
		"--port-file", port_file, "--max-seconds", "60",
	};
	size_t n = 8;

	while (extra && *extra && n < MAX_PEER_ARGS + 8)
		argv[n++] = *extra++;
	argv[n] = NULL;
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	execvp("python3", (char *const *)argv);
	_exit(127);
}

/* Start the peer with extra options (NULL-terminated) and wait, bounded,
 * for it to publish its port. */
static void
peer_start(const char *const *extra)
{
	char port_file[192], *s;
	long deadline = now_ms() + PEER_START_WAIT_MS;
	int status;

	snprintf(port_file, sizeof(port_file), "%s/port", peer.tmp);
	peer.pid = fork();
	ck_assert_int_ge(peer.pid, 0);
	if (peer.pid == 0)
		exec_peer(extra, port_file);
	while (!(s = slurp(port_file, NULL)) && now_ms() < deadline) {
		ck_assert_int_eq(waitpid(peer.pid, &status, WNOHANG), 0);
		usleep(20000);
	}
	ck_assert_msg(s != NULL, "peer did not start within %d ms",
		      PEER_START_WAIT_MS);
	peer.port = atoi(s);
	free(s);
	ck_assert_int_gt(peer.port, 0);
}

static void
peer_stop(void)
{
	long deadline = now_ms() + 5000;
	int status;

	if (peer.pid <= 0)
		return;
	kill(peer.pid, SIGTERM);
	while (waitpid(peer.pid, &status, WNOHANG) == 0) {
		if (now_ms() > deadline) {
			kill(peer.pid, SIGKILL);
			waitpid(peer.pid, &status, 0);
			break;
		}
		usleep(20000);
	}
	peer.pid = 0;
}

static int
rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

static void
setup(void)
{
	snprintf(peer.tmp, sizeof(peer.tmp), "%s/t.XXXXXX", root);
	ck_assert_ptr_nonnull(mkdtemp(peer.tmp));
	snprintf(peer.dir, sizeof(peer.dir), "%s/peer", peer.tmp);
	peer.pid = 0;
}

static void
teardown(void)
{
	peer_stop();
	nftw(peer.tmp, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* A request to the running peer with sane defaults. */
static struct ps_http_request
req(char *url, size_t urlsz, const char *path_query, const char *body)
{
	struct ps_http_request rq = {
		.url = url,
		.content_type = "text/plain",
		.body = body,
		.body_len = body ? strlen(body) : 0,
		.connect_timeout_ms = 5000,
		.total_timeout_ms = 20000,
	};

	snprintf(url, urlsz, "http://127.0.0.1:%d%s", peer.port, path_query);
	return rq;
}

#define FOLDED "main;work;leaf 3\nmain;idle 1\n"
#define APP_QUERY "/ingest?name=app.cpu%7Bk%3Dv%7D&from=1700000000&until=1700000010"

/* A small but valid pprof Profile with bytes a text path would mangle:
 * sample_type{1,2}, string_table ["", "samples", "count", "a\r\n\0b"]. */
static const unsigned char pprof[] = {
	0x0a, 0x04, 0x08, 0x01, 0x10, 0x02,
	0x32, 0x00,
	0x32, 0x07, 's', 'a', 'm', 'p', 'l', 'e', 's',
	0x32, 0x05, 'c', 'o', 'u', 'n', 't',
	0x32, 0x05, 'a', '\r', '\n', 0x00, 'b',
};
#define BOUNDARY "pyroshim0boundary0x"

static size_t
multipart(char *out, size_t outsz)
{
	static const char head[] =
		"--" BOUNDARY "\r\n"
		"Content-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\n"
		"Content-Type: application/octet-stream\r\n\r\n";
	static const char tail[] =
		"\r\n--" BOUNDARY "\r\n"
		"Content-Disposition: form-data; name=\"sample_type_config\"; filename=\"sample_type_config.json\"\r\n"
		"Content-Type: application/octet-stream\r\n\r\n"
		"{\"samples\":{\"units\":\"samples\"}}\r\n"
		"--" BOUNDARY "--\r\n";
	size_t n = 0;

	ck_assert_uint_lt(sizeof(head) + sizeof(pprof) + sizeof(tail), outsz);
	memcpy(out, head, sizeof(head) - 1);
	n += sizeof(head) - 1;
	memcpy(out + n, pprof, sizeof(pprof));
	n += sizeof(pprof);
	memcpy(out + n, tail, sizeof(tail) - 1);
	return n + sizeof(tail) - 1;
}

START_TEST(http_multipart_post_arrives_intact)
{
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256], body[1024], *json, *pb;
	size_t n;

	peer_start(NULL);
	rq = req(url, sizeof(url), APP_QUERY "&spyName=pyroshim", NULL);
	rq.content_type = "multipart/form-data; boundary=" BOUNDARY;
	rq.body = body;
	rq.body_len = multipart(body, sizeof(body));
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 200);
	ck_assert_int_eq(rs.retry_after_s, -1);
	pb = peer_file("0001.pb", &n);
	ck_assert_ptr_nonnull(pb);
	ck_assert_uint_eq(n, sizeof(pprof));
	ck_assert_mem_eq(pb, pprof, sizeof(pprof));
	json = peer_file("0001.json", NULL);
	ck_assert_ptr_nonnull(json);
	ck_assert_ptr_nonnull(strstr(json, "\"kind\": \"pprof-multipart\""));
	ck_assert_ptr_nonnull(strstr(json, "\"app_name\": \"app.cpu\""));
	ck_assert_ptr_nonnull(strstr(json, "\"k\": \"v\""));
	ck_assert_ptr_nonnull(strstr(json, "\"User-Agent\": \"pyroshim/"));
	ck_assert_ptr_nonnull(strstr(json, "\"units\": \"samples\""));
	ck_assert_ptr_null(strstr(json, "\"Expect\""));
	free(pb);
	free(json);
}
END_TEST

START_TEST(http_folded_post_with_empty_response_body)
{
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256], *folded;

	peer_start(NULL);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 200);
	ck_assert_str_eq(rs.message, "");
	folded = peer_file("0001.folded", NULL);
	ck_assert_ptr_nonnull(folded);
	ck_assert_str_eq(folded, FOLDED);
	free(folded);
}
END_TEST

START_TEST(http_reports_500_with_json_message)
{
	static const char *const args[] = { "--status", "500", NULL };
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 500);
	ck_assert_int_eq(rs.retry_after_s, -1);
	ck_assert_str_eq(rs.message, "pyroscope_peer injected status 500");
}
END_TEST

START_TEST(http_reports_retry_after_on_429)
{
	static const char *const args[] = {
		"--status", "429", "--retry-after", "2",
		"--body", "resource_exhausted: slow down\x01\nsecond line", NULL,
	};
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 429);
	ck_assert_int_eq(rs.retry_after_s, 2);
	/* First line only, the control byte sanitised. */
	ck_assert_str_eq(rs.message, "resource_exhausted: slow down?");
}
END_TEST

START_TEST(http_parses_retry_after_http_date)
{
	static const char *const args[] = {
		"--status", "503", "--retry-after", "Wed, 21 Oct 2015 07:28:00 GMT", NULL,
	};
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 503);
	/* A date in the past means "retry now". */
	ck_assert_int_eq(rs.retry_after_s, 0);
}
END_TEST

START_TEST(http_fault_applies_to_first_n_only)
{
	static const char *const args[] = { "--status", "503", "--fail-first", "1", NULL };
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 503);
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 200);
}
END_TEST

START_TEST(http_sends_basic_auth_tenant_and_headers)
{
	static const char *const args[] = {
		"--require-basic", "user:pa55word", "--require-tenant", "t1", NULL,
	};
	static const char *const hdrs[] = { "X-Scope-OrgID: t1", "X-Extra: yes" };
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256], *json;

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	rq.headers = hdrs;
	rq.nheaders = 2;
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 401);
	rq.user = "user";
	rq.password = "pa55word";
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 200);
	json = peer_file("0001.json", NULL);
	ck_assert_ptr_nonnull(json);
	/* base64("user:pa55word") */
	ck_assert_ptr_nonnull(strstr(json, "\"Authorization\": \"Basic dXNlcjpwYTU1d29yZA==\""));
	ck_assert_ptr_nonnull(strstr(json, "\"X-Scope-OrgID\": \"t1\""));
	ck_assert_ptr_nonnull(strstr(json, "\"X-Extra\": \"yes\""));
	free(json);
}
END_TEST

START_TEST(http_sends_bearer_token)
{
	static const char *const args[] = { "--require-bearer", "tok-123", NULL };
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256], *json;

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	rq.bearer_token = "tok-123";
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 200);
	json = peer_file("0001.json", NULL);
	ck_assert_ptr_nonnull(json);
	ck_assert_ptr_nonnull(strstr(json, "\"Authorization\": \"Bearer tok-123\""));
	free(json);
}
END_TEST

START_TEST(http_masks_secret_echoed_by_server)
{
	static const char *const args[] = {
		"--status", "401", "--body",
		"{\"code\":\"x\", \"message\" : \"bad token s3cr3t-tok \\\"q\\\"\\n\"}", NULL,
	};
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	rq.bearer_token = "s3cr3t-tok";
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 401);
	ck_assert_str_eq(rs.message, "bad token ********** \"q\"");
}
END_TEST

START_TEST(http_times_out_on_hanging_peer)
{
	static const char *const args[] = { "--hang", NULL };
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];
	long t0;

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	rq.total_timeout_ms = 500;
	t0 = now_ms();
	ck_assert_int_eq(ps_http_post(&rq, &rs), -ETIMEDOUT);
	ck_assert_int_lt(now_ms() - t0, 3000);
	ck_assert_int_eq(rs.status, 0);
	ck_assert_str_ne(rs.message, "");
}
END_TEST

START_TEST(http_closed_connection_is_eio)
{
	static const char *const args[] = { "--close", NULL };
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	ck_assert_int_eq(ps_http_post(&rq, &rs), -EIO);
	ck_assert_int_eq(rs.status, 0);
}
END_TEST

START_TEST(http_garbage_reply_is_eproto)
{
	static const char *const args[] = { "--garbage", NULL };
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];

	peer_start(args);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	ck_assert_int_eq(ps_http_post(&rq, &rs), -EPROTO);
}
END_TEST

START_TEST(http_closed_port_is_connection_refused)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];
	int fd;

	/* Bound but not listening: the port stays ours and refuses. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	peer.port = ntohs(sa.sin_port);
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	ck_assert_int_eq(ps_http_post(&rq, &rs), -ECONNREFUSED);
	ck_assert_int_eq(rs.status, 0);
	close(fd);
}
END_TEST

START_TEST(peer_rejects_duplicate_label)
{
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256], *log;

	peer_start(NULL);
	rq = req(url, sizeof(url), "/ingest?name=app.cpu%7Bk%3Dv%2Ck%3Dw%7D", FOLDED);
	ck_assert_int_eq(ps_http_post(&rq, &rs), 0);
	ck_assert_int_eq(rs.status, 400);
	ck_assert_str_eq(rs.message, "name: duplicate label 'k'");
	log = peer_file("rejected.log", NULL);
	ck_assert_ptr_nonnull(log);
	ck_assert_ptr_nonnull(strstr(log, "duplicate label"));
	ck_assert_ptr_null(peer_file("0001.json", NULL));
	free(log);
}
END_TEST

START_TEST(http_rejects_invalid_requests)
{
	static const char *const bad_hdr[] = { "X-A: 1\r\nX-Injected: 2" };
	struct ps_http_response rs;
	struct ps_http_request rq;
	char url[256];

	peer.port = 9;  /* never contacted */
	rq = req(url, sizeof(url), APP_QUERY, FOLDED);
	rq.user = "only-user";
	ck_assert_int_eq(ps_http_post(&rq, &rs), -EINVAL);
	rq.user = NULL;
	rq.headers = bad_hdr;
	rq.nheaders = 1;
	ck_assert_int_eq(ps_http_post(&rq, &rs), -EINVAL);
	rq.nheaders = PS_HTTP_MAX_HEADERS + 1;
	ck_assert_int_eq(ps_http_post(&rq, &rs), -EINVAL);
	rq.nheaders = 0;
	rq.url = NULL;
	ck_assert_int_eq(ps_http_post(&rq, &rs), -EINVAL);
	ck_assert_int_eq(ps_http_post(NULL, &rs), -EINVAL);
}
END_TEST

static Suite *
http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *tc = tcase_create("loopback");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, http_multipart_post_arrives_intact);
	tcase_add_test(tc, http_folded_post_with_empty_response_body);
	tcase_add_test(tc, http_reports_500_with_json_message);
	tcase_add_test(tc, http_reports_retry_after_on_429);
	tcase_add_test(tc, http_parses_retry_after_http_date);
	tcase_add_test(tc, http_fault_applies_to_first_n_only);
	tcase_add_test(tc, http_sends_basic_auth_tenant_and_headers);
	tcase_add_test(tc, http_sends_bearer_token);
	tcase_add_test(tc, http_masks_secret_echoed_by_server);
	tcase_add_test(tc, http_times_out_on_hanging_peer);
	tcase_add_test(tc, http_closed_connection_is_eio);
	tcase_add_test(tc, http_garbage_reply_is_eproto);
	tcase_add_test(tc, http_closed_port_is_connection_refused);
	tcase_add_test(tc, peer_rejects_duplicate_label);
	tcase_add_test(tc, http_rejects_invalid_requests);
	suite_add_tcase(s, tc);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	if (ps_http_load() != 0) {
		printf("check_http: libcurl.so.4 not loadable, skipping\n");
		return 0;
	}
	if (access(PEER_SCRIPT, R_OK) != 0) {
		fprintf(stderr, "check_http: run from the repository root (%s)\n",
			PEER_SCRIPT);
		return 1;
	}
	snprintf(root, sizeof(root), "/tmp/check_http.XXXXXX");
	if (!mkdtemp(root)) {
		perror("check_http: mkdtemp");
		return 1;
	}
	sr = srunner_create(http_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	nftw(root, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	return failed ? 1 : 0;
}

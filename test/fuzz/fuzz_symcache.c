/* fuzz_symcache.c -- libFuzzer target for symbolize/symcache.c: a symbol
 * cache file as another process (or an attacker with the user's rights,
 * or a full disk) may have left it.
 *
 * Input: one control byte, then the file's bytes.  With bit 0 of the
 * control byte set, the header's build ID is made the one asked for and
 * its sum recomputed (symcache.c's struct head and body_sum), so that the
 * checks behind the sum -- counts, ranges, frame and string offsets -- see
 * the mutations too.  The start checks that a file so fixed up is read:
 * the layout here was once stale (a CRC written over the flags), and every
 * fixed-up input was rejected before those checks.
 * Invariants:
 *   - opening never fails but for want of memory, whatever the file;
 *   - what a valid file answers has at most `max` frames of NUL-terminated
 *     strings (ASan sees a read past the pool);
 *   - a file this module writes is read back whole (the ranges added and
 *     those of a valid input are all there).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "common/hash.h"
#include "common/log.h"
#include "symbolize/symcache.h"

#define HEAD      104   /* sizeof(struct head) */
#define HEAD_SUM  96    /* offsetof(struct head, sum) */
#define HEAD_NENT 80    /* offsetof(struct head, nent); nframe and npool follow */
#define ENT       24    /* sizeof(struct ent) */
#define FRAME     20    /* sizeof(struct frame) */

static char dir[64];
static char path[PATH_MAX];
static const uint8_t id[20] = { 0x12, 0x34, 0x56, 0x78, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
				13, 14, 15, 16 };

static void check_fix_up(void);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC), n, i;

	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/fuzz_symcache.XXXXXX");
	if (fd < 0 || !mkdtemp(dir))
		abort();
	ps_log_setup(PS_LOG_ERROR, fd);
	n = snprintf(path, sizeof(path), "%s/", dir);
	for (i = 0; i < 20; i++)
		n += snprintf(path + n, 3, "%02x", id[i]);
	check_fix_up();
	return 0;
}

static void
fix_up(uint8_t *b, size_t n)
{
	uint32_t idlen = 20, nent, nframe;
	uint64_t sum, e, f;

	memcpy(b + 12, &idlen, 4);
	memset(b + 16, 0, 64);
	memcpy(b + 16, id, 20);
	memcpy(&nent, b + HEAD_NENT, 4);
	memcpy(&nframe, b + HEAD_NENT + 4, 4);
	/* The arrays as the header's counts place them, within the input
	 * (counts that do not fit are rejected by size before the sum). */
	e = (uint64_t)nent * ENT < n - HEAD ? (uint64_t)nent * ENT : n - HEAD;
	f = (uint64_t)nframe * FRAME < n - HEAD - e ? (uint64_t)nframe * FRAME : n - HEAD - e;
	sum = ps_hash_xxh64(b, HEAD_SUM, 0);
	sum = ps_hash_xxh64(b + HEAD, e, sum);
	sum = ps_hash_xxh64(b + HEAD + e, f, sum);
	sum = ps_hash_xxh64(b + HEAD + e + f, n - HEAD - e - f, sum);
	memcpy(b + HEAD_SUM, &sum, 8);
}

/* A file of one range and one frame, fixed up, is read: fix_up knows
 * the layout. */
static void
check_fix_up(void)
{
	uint8_t b[HEAD + ENT + FRAME + 8] = "PYROSYM\003";
	uint32_t order = 0x01020304, counts[3] = { 1, 1, 8 };
	uint64_t range[2] = { 0x1000, 0x1010 };
	uint32_t frame[5] = { 0, 0xffffffffu, 2, 7, 5 };
	struct ps_symcache_stats st;
	struct ps_symcache *c;
	int fd;

	memcpy(b + 8, &order, 4);
	memcpy(b + HEAD_NENT, counts, sizeof(counts));
	memcpy(b + HEAD, range, sizeof(range));   /* frame 0, n 0 past it: zeros */
	b[HEAD + 20] = 1;                         /* n = 1 */
	memcpy(b + HEAD + ENT, frame, sizeof(frame));
	memcpy(b + HEAD + ENT + FRAME, "f\0/f.c\0\0", 8);
	fix_up(b, sizeof(b));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	FUZZ_ASSERT(fd >= 0 && write(fd, b, sizeof(b)) == (ssize_t)sizeof(b) && close(fd) == 0);
	FUZZ_ASSERT(ps_symcache_open(dir, id, 20, 1u << 30, &c) == 0);
	ps_symcache_get_stats(c, &st);
	FUZZ_ASSERT(st.loaded == 1 && st.ranges == 1);
	ps_symcache_free(c);
	FUZZ_ASSERT(unlink(path) == 0);
}

static void
query(struct ps_symcache *c, uint64_t a)
{
	struct ps_dwarf_frame f[8];
	uint64_t end = 0;
	int n = ps_symcache_find(c, a, f, 8, &end);

	FUZZ_ASSERT(n == -ENOENT || (n >= 0 && n <= 8));
	for (int k = 0; k < n; k++) {
		FUZZ_ASSERT(strlen(f[k].name) < (1u << 26) && strlen(f[k].file) < (1u << 26));
		if (f[k].linkage)
			(void)strlen(f[k].linkage);
	}
	if (n >= 0)
		FUZZ_ASSERT(end > a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ps_dwarf_frame fr = { "fuzz", NULL, "/f.c", 1, 1 };
	struct ps_symcache_stats st, st2;
	struct ps_symcache *c;
	uint8_t *b;
	int fd, rc;

	if (size < 1 || size > (1u << 20))
		return 0;
	b = malloc(size);
	if (!b)
		return 0;
	memcpy(b, data + 1, size - 1);
	if ((data[0] & 1) && size - 1 >= HEAD)
		fix_up(b, size - 1);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	FUZZ_ASSERT(fd >= 0);
	FUZZ_ASSERT(write(fd, b, size - 1) == (ssize_t)(size - 1));
	close(fd);
	rc = ps_symcache_open(dir, id, 20, 1u << 30, &c);
	FUZZ_ASSERT(rc == 0 || rc == -ENOMEM);
	if (rc) {
		free(b);
		return 0;
	}
	ps_symcache_get_stats(c, &st);
	FUZZ_ASSERT(st.loaded + st.rejected <= 1);
	FUZZ_ASSERT(st.loaded || st.ranges == 0);
	query(c, 0);
	for (size_t i = 0; i + 8 <= size - 1 && i < 256; i += 8) {
		uint64_t a;

		memcpy(&a, b + i, 8);
		query(c, a);
		query(c, a - 1);
	}
	/* Round trip: one range more, written and read back. */
	rc = ps_symcache_add(c, 1ull << 62, (1ull << 62) + 16, 1ull << 62, &fr, 1);
	FUZZ_ASSERT(rc == 0 || rc == -ENOMEM || rc == -ENOSPC);
	ps_symcache_get_stats(c, &st);
	if (rc == 0 && ps_symcache_save(c) == 0) {
		struct ps_symcache *d;

		FUZZ_ASSERT(ps_symcache_open(dir, id, 20, 1u << 30, &d) == 0);
		ps_symcache_get_stats(d, &st2);
		FUZZ_ASSERT(st2.loaded == 1 && st2.ranges == st.ranges);
		query(d, 1ull << 62);
		ps_symcache_free(d);
	}
	ps_symcache_free(c);
	free(b);
	return 0;
}

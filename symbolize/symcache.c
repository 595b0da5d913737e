/* symcache.c -- source lines remembered per build ID.  See symcache.h.
 *
 * The file, in this machine's byte order (the header says which):
 *
 *   struct head                      magic, byte order, build ID, counts,
 *                                    flags (COMPLETE), XXH64 of the rest
 *                                    of the header and of everything
 *                                    after it (hash.h)
 *   struct ent   [nent]              ranges sorted by lo, not overlapping
 *   struct frame [nframe]            the chains, innermost frame first
 *   char         pool[npool]         NUL-terminated strings
 *
 * In memory the same three arrays, so that loading is one mapping and
 * one check (the arrays stay in the file's pages until the first add),
 * and saving one write.  A file is never written in place: a save writes
 * a temporary file and renames it over the old one, and eviction unlinks,
 * so a mapping keeps the pages it checked.
 */
#include "symbolize/symcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/shared.h"

#define MAGIC       "PYROSYM\003"  /* 2: flags; 3: XXH64, not CRC-32 */
#define ORDER       0x01020304u
#define MAX_ID      64                  /* build ID bytes (SHA-1's are 20) */
#define MAX_CHAIN   32                  /* frames of one answer */
#define MAX_FILE    (64u << 20)         /* bytes of one object's file */
#define NONE        UINT32_MAX          /* a frame without a linkage name */
#define TMP_AGE     60                  /* s: a temporary file older is left over */
#define MAX_EVICT   4096                /* files looked at when evicting */

struct head {
	char magic[8];
	uint32_t order;
	uint32_t idlen;
	uint8_t id[MAX_ID];
	uint32_t nent, nframe, npool;
	uint32_t flags;         /* PS_SYMCACHE_COMPLETE, PS_SYMCACHE_WALKED */
	uint64_t sum;           /* the check (body_sum) */
};
_Static_assert(sizeof(struct head) == 104, "the ranges after the header are 8-byte aligned; "
	       "test/fuzz and make_corpus.py know this layout");


struct ent {
	uint64_t lo, hi;        /* link-time addresses */
	uint32_t frame;         /* first of n frames */
	uint32_t n;             /* 0: no line information here */
};

struct frame {
	uint32_t name, linkage, file;   /* pool offsets; linkage may be NONE */
	int32_t line, decl;
};

struct ps_symcache {
	struct ps_shared sh;    /* in `shared`, when ps_symcache_get opened it;
				 * first: the set's list points at the block */
	char path[PATH_MAX];    /* the object's file */
	char dir[PATH_MAX];
	uint8_t id[MAX_ID];
	uint32_t idlen;
	uint64_t cap;           /* the directory's bound */
	struct ent *ent;        /* owned (or in img), nent sorted by lo */
	struct frame *frame;    /* owned (or in img) */
	char *pool;             /* owned (or in img) */
	unsigned char *img;     /* owned: the file's mapping (img_len bytes)
				 * that ent, frame and pool point into until
				 * the first add (own) */
	size_t img_len;
	uint32_t nent, aent, nframe, aframe, npool, apool;
	uint32_t *strs;         /* owned: pool offsets + 1, open addressing */
	uint32_t nstrs;         /* slots, a power of two */
	uint32_t count;         /* strings in the pool */
	int dirty;              /* added to since the last save */
	uint32_t flags;         /* PS_SYMCACHE_*: here, or in the file */
	int full;               /* its file would pass the bound: no more */
	int loaded, rejected;
};

/* ---- the directory ----------------------------------------------------- */

/* mkdir, mode 0700, of path and of its parent when that is missing. */
static int
make_dir(const char *path)
{
	char parent[PATH_MAX];
	char *slash;

	if (mkdir(path, 0700) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT || snprintf(parent, sizeof(parent), "%s", path) >= (int)sizeof(parent))
		return -errno;
	slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return -ENOENT;
	*slash = '\0';
	if (mkdir(parent, 0700) && errno != EEXIST)
		return -errno;
	return mkdir(path, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

int
ps_symcache_dir_check(const char *dir, const char **why)
{
	struct stat st;
	int rc;

	*why = "";
	if (!dir || dir[0] != '/') {
		*why = "not an absolute path";
		return -EINVAL;
	}
	rc = make_dir(dir);
	if (rc) {
		*why = strerror(-rc);
		return rc;
	}
	if (lstat(dir, &st)) {
		*why = strerror(errno);
		return -errno;
	}
	if (S_ISLNK(st.st_mode)) {
		*why = "a symbolic link";
		return -EPERM;
	}
	if (!S_ISDIR(st.st_mode)) {
		*why = "not a directory";
		return -EPERM;
	}
	if (st.st_uid != geteuid()) {
		*why = "owned by another user";
		return -EPERM;
	}
	if (st.st_mode & 077) {
		*why = "open to other users (mode is not 0700)";
		return -EPERM;
	}
	return 0;
}

/* ---- strings ------------------------------------------------------------ */

/* ps_grow within the bound of one file: -ENOSPC past it. */
static int
grow(void *v, uint32_t *cap, uint64_t need, size_t size)
{
	int rc = need > MAX_FILE / size ? -E2BIG :
		 ps_grow(v, cap, (uint32_t)need, (uint32_t)(MAX_FILE / size), size);

	return rc == -E2BIG ? -ENOSPC : rc;
}

/* Index the pool's strings in a table of at least n slots, and of more
 * when they would fill over half of it (a pool read from a file comes
 * with no index). */
static int
strs_rehash(struct ps_symcache *c, uint32_t n)
{
	uint32_t *v, off, i, count = 0;
	const char *s;

	for (off = 0; off < c->npool; off += (uint32_t)strlen(c->pool + off) + 1)
		count++;
	while (n / 2 < count + 1)
		n *= 2;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	free(c->strs);
	c->strs = v;
	c->nstrs = n;
	c->count = 0;
	/* Every string of the pool, in order: NUL-separated. */
	for (off = 0; off < c->npool; off += (uint32_t)strlen(c->pool + off) + 1, c->count++) {
		s = c->pool + off;
		for (i = (uint32_t)ps_hash_bytes(s, strlen(s)) & (n - 1); v[i]; i = (i + 1) & (n - 1))
			;
		v[i] = off + 1;
	}
	return 0;
}

/* The offset of s in the pool, added when new. */
static int
intern(struct ps_symcache *c, const char *s, uint32_t *off)
{
	size_t len = strlen(s);
	uint32_t i, mask;
	int rc;

	if (!c->strs || c->count + 1 > c->nstrs / 2) {
		rc = strs_rehash(c, c->nstrs ? 2 * c->nstrs : 1024);
		if (rc)
			return rc;
	}
	mask = c->nstrs - 1;
	for (i = (uint32_t)ps_hash_bytes(s, len) & mask; c->strs[i]; i = (i + 1) & mask)
		if (!strcmp(c->pool + c->strs[i] - 1, s)) {
			*off = c->strs[i] - 1;
			return 0;
		}
	rc = grow(&c->pool, &c->apool, (uint64_t)c->npool + len + 1, 1);
	if (rc)
		return rc;
	memcpy(c->pool + c->npool, s, len + 1);
	*off = c->npool;
	c->strs[i] = c->npool + 1;
	c->npool += (uint32_t)len + 1;
	c->count++;
	return 0;
}

/* Arrays of c's own in place of those in its image, before they change.
 * Returns 0 or -ENOMEM (c unchanged). */
static int
own(struct ps_symcache *c)
{
	struct ent *e;
	struct frame *f;
	char *p;

	if (!c->img)
		return 0;
	/* Room for at least one of each: the capacities below say so.  (An
	 * empty array once got one byte for a capacity of one element: a file
	 * without frames, then a range with some, wrote past it.) */
	e = malloc((c->nent ? c->nent : 1) * sizeof(*e));
	f = malloc((c->nframe ? c->nframe : 1) * sizeof(*f));
	p = malloc(c->npool ? c->npool : 1);
	if (!e || !f || !p) {
		free(e);
		free(f);
		free(p);
		return -ENOMEM;
	}
	memcpy(e, c->ent, c->nent * sizeof(*e));
	memcpy(f, c->frame, c->nframe * sizeof(*f));
	memcpy(p, c->pool, c->npool);
	c->ent = e;
	c->frame = f;
	c->pool = p;
	c->aent = c->nent ? c->nent : 1;
	c->aframe = c->nframe ? c->nframe : 1;
	c->apool = c->npool ? c->npool : 1;
	(void)munmap(c->img, c->img_len);
	c->img = NULL;
	return 0;
}

/* ---- ranges ------------------------------------------------------------- */

/* The index of the first range with lo > addr. */
static uint32_t
upper(const struct ps_symcache *c, uint64_t addr)
{
	uint32_t lo = 0, hi = c->nent, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (c->ent[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int
ps_symcache_find(struct ps_symcache *c, uint64_t addr, struct ps_dwarf_frame *out, int max,
		 uint64_t *end)
{
	const struct ent *e;
	const struct frame *f;
	uint32_t i = upper(c, addr), k;

	if (i == 0 || addr >= c->ent[i - 1].hi)
		return -ENOENT;
	e = &c->ent[i - 1];
	*end = e->hi;
	for (k = 0; k < e->n && (int)k < max; k++) {
		f = &c->frame[e->frame + k];
		out[k].name = c->pool + f->name;
		out[k].linkage = f->linkage == NONE ? NULL : c->pool + f->linkage;
		out[k].file = c->pool + f->file;
		out[k].line = f->line;
		out[k].decl_line = f->decl;
	}
	return (int)k;
}

uint64_t
ps_symcache_gap(const struct ps_symcache *c, uint64_t a, uint64_t hi)
{
	uint32_t i = upper(c, a);

	/* Ranges do not overlap: the one before holds a, or none does. */
	while (a < hi && i > 0 && a < c->ent[i - 1].hi) {
		a = c->ent[i - 1].hi;
		if (i < c->nent && c->ent[i].lo == a)
			i++;
		else
			break;
	}
	return a < hi ? a : hi;
}

int
ps_symcache_add(struct ps_symcache *c, uint64_t lo, uint64_t hi, uint64_t addr,
		const struct ps_dwarf_frame *f, int n)
{
	struct frame fr[MAX_CHAIN];
	uint32_t i, at;
	int k, rc;

	if (lo > addr || addr >= hi || n < 0 || n > MAX_CHAIN)
		return -EINVAL;
	if (c->full)
		return -ENOSPC;
	rc = own(c);
	if (rc)
		return rc;
	at = upper(c, addr);
	if (at > 0 && addr < c->ent[at - 1].hi)
		return 0;  /* kept already */
	if (at > 0 && lo < c->ent[at - 1].hi)
		lo = c->ent[at - 1].hi;
	if (at < c->nent && hi > c->ent[at].lo)
		hi = c->ent[at].lo;
	for (k = 0; k < n; k++) {
		fr[k].linkage = NONE;
		rc = intern(c, f[k].name ? f[k].name : "", &fr[k].name);
		if (!rc && f[k].linkage)
			rc = intern(c, f[k].linkage, &fr[k].linkage);
		if (!rc)
			rc = intern(c, f[k].file ? f[k].file : "", &fr[k].file);
		if (rc)
			return rc;
		fr[k].line = f[k].line;
		fr[k].decl = f[k].decl_line;
	}
	if ((rc = grow(&c->frame, &c->aframe, (uint64_t)c->nframe + (unsigned)n, sizeof(*c->frame))) ||
	    (rc = grow(&c->ent, &c->aent, (uint64_t)c->nent + 1, sizeof(*c->ent))))
		return rc;
	if (n > 0)  /* frame may still be NULL */
		memcpy(c->frame + c->nframe, fr, (size_t)n * sizeof(*fr));
	for (i = c->nent; i > at; i--)
		c->ent[i] = c->ent[i - 1];
	c->ent[at] = (struct ent){ lo, hi, c->nframe, (uint32_t)n };
	c->nframe += (uint32_t)n;
	c->nent++;
	c->dirty = 1;
	return 0;
}

/* ---- files -------------------------------------------------------------- */

/* The check of a file: XXH64 of the header up to its sum, then of each
 * array, each seeded with the hash so far (the arrays are apart in memory
 * when they are written).  Not CRC-32: a warm helper's check of libc's
 * 9 MB file was a third of its CPU (BENCHMARKS 14x). */
static uint64_t
body_sum(const struct head *h, const struct ent *e, uint32_t nent, const struct frame *f,
	 uint32_t nframe, const char *pool, uint32_t npool)
{
	uint64_t sum = ps_hash_xxh64(h, offsetof(struct head, sum), 0);

	sum = ps_hash_xxh64(e, (size_t)nent * sizeof(*e), sum);
	sum = ps_hash_xxh64(f, (size_t)nframe * sizeof(*f), sum);
	return ps_hash_xxh64(pool, npool, sum);
}

/* The parts of a file image of `size` bytes at p, if they are a valid
 * cache of c's build ID; NULL otherwise. */
static const struct head *
check_image(const struct ps_symcache *c, const unsigned char *p, size_t size)
{
	const struct head *h = (const void *)p;
	const struct ent *e;
	const struct frame *f;
	const char *pool;
	uint64_t want;
	uint32_t i;

	if (size < sizeof(*h) || memcmp(h->magic, MAGIC, 8) || h->order != ORDER ||
	    h->idlen != c->idlen || memcmp(h->id, c->id, c->idlen))
		return NULL;
	want = sizeof(*h) + (uint64_t)h->nent * sizeof(*e) + (uint64_t)h->nframe * sizeof(*f) +
	       h->npool;
	if (want != size || (h->npool && p[size - 1] != '\0'))
		return NULL;
	e = (const void *)(h + 1);
	f = (const void *)(e + h->nent);
	pool = (const char *)(f + h->nframe);
	if (body_sum(h, e, h->nent, f, h->nframe, pool, h->npool) != h->sum)
		return NULL;
	for (i = 0; i < h->nent; i++)
		if (e[i].lo >= e[i].hi || (i && e[i].lo < e[i - 1].hi) || e[i].n > MAX_CHAIN ||
		    e[i].frame > h->nframe || e[i].n > h->nframe - e[i].frame)
			return NULL;
	for (i = 0; i < h->nframe; i++)
		if (f[i].name >= h->npool || f[i].file >= h->npool ||
		    (f[i].linkage != NONE && f[i].linkage >= h->npool))
			return NULL;
	return h;
}

/* Map the object's file, if it is one to trust, read-only.  Mapped, not
 * read: libc6-dbg's libc makes a file of 9 MB, whose copy and fresh pages
 * were half a helper's CPU on a warm run of the generator.  Returns its
 * size, 0 when there is none to use (*bad set when one was there), or
 * -ENOMEM. */
static ssize_t
map_file(struct ps_symcache *c, unsigned char **img, int *bad)
{
	struct stat st;
	void *p;
	int fd = open(c->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);

	*img = NULL;
	*bad = 0;
	if (fd < 0) {
		*bad = errno != ENOENT;
		return 0;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022) || st.st_size <= 0 || st.st_size > MAX_FILE) {
		*bad = 1;
		close(fd);
		return 0;
	}
	/* Populated at once: the check reads every page. */
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -ENOMEM;
	}
	/* Used: the eviction keeps it longer. */
	(void)futimens(fd, NULL);
	close(fd);
	*img = p;
	return st.st_size;
}

/* Every range of a valid image that c does not hold yet, into c. */
static int
merge_image(struct ps_symcache *c, const struct head *h)
{
	const struct ent *e = (const void *)(h + 1);
	const struct frame *f = (const void *)(e + h->nent);
	const char *pool = (const char *)(f + h->nframe);
	struct ps_dwarf_frame df[MAX_CHAIN];
	uint32_t i, k;
	int rc;

	for (i = 0; i < h->nent; i++) {
		for (k = 0; k < e[i].n; k++) {
			const struct frame *x = &f[e[i].frame + k];

			df[k].name = pool + x->name;
			df[k].linkage = x->linkage == NONE ? NULL : pool + x->linkage;
			df[k].file = pool + x->file;
			df[k].line = x->line;
			df[k].decl_line = x->decl;
		}
		rc = ps_symcache_add(c, e[i].lo, e[i].hi, e[i].lo, df, (int)e[i].n);
		/* Full: what this process learned goes first. */
		if (rc && rc != -EINVAL)
			return rc;
	}
	return 0;
}

/* The arrays of c's valid image img (its header h), c being empty: read
 * where they are, nothing copied or added one by one (own() copies them
 * at the first add; the strings' index is made then too).  c owns img. */
static void
adopt_image(struct ps_symcache *c, unsigned char *img, size_t len, const struct head *h)
{
	c->ent = (void *)(img + sizeof(*h));
	c->frame = (void *)(c->ent + h->nent);
	c->pool = (char *)(c->frame + h->nframe);
	c->nent = h->nent;
	c->nframe = h->nframe;
	c->npool = h->npool;
	c->aent = c->aframe = c->apool = 0;
	c->img = img;
	c->img_len = len;
}

static int
load(struct ps_symcache *c)
{
	unsigned char *img;
	const struct head *h;
	ssize_t n = map_file(c, &img, &c->rejected);
	int rc = 0;

	if (n <= 0)
		return (int)n;
	h = check_image(c, img, (size_t)n);
	if (h && (c->nent || c->npool || c->img))
		rc = merge_image(c, h);
	else if (h)
		adopt_image(c, img, (size_t)n, h);
	/* The ranges of the file are all here now, and what it said of them. */
	if (h && !rc)
		c->flags |= h->flags & (PS_SYMCACHE_COMPLETE | PS_SYMCACHE_WALKED);
	c->rejected = !h;
	c->loaded = h && !rc;
	if (c->img != img)
		(void)munmap(img, (size_t)n);
	return rc;
}

int
ps_symcache_open(const char *dir, const uint8_t *id, size_t idlen, uint64_t cap,
		 struct ps_symcache **out)
{
	struct ps_symcache *c;
	size_t i, n;
	int rc;

	if (!dir || !id || idlen == 0 || idlen > MAX_ID)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	n = (size_t)snprintf(c->path, sizeof(c->path), "%s/", dir);
	for (i = 0; i < idlen && n + 3 < sizeof(c->path); i++)
		n += (size_t)snprintf(c->path + n, 3, "%02x", id[i]);
	if (i < idlen || snprintf(c->dir, sizeof(c->dir), "%s", dir) >= (int)sizeof(c->dir)) {
		free(c);
		return -EINVAL;
	}
	memcpy(c->id, id, idlen);
	c->idlen = (uint32_t)idlen;
	c->cap = cap;
	rc = load(c);
	if (rc == -ENOMEM) {
		ps_symcache_free(c);
		return rc;
	}
	c->dirty = 0;  /* what was loaded is on disk */
	*out = c;
	return 0;
}

/* Keep the directory within its bound: the files used least recently go
 * first; temporary files that a dead writer left are removed. */
static void
evict(const struct ps_symcache *c)
{
	struct item { time_t t; off_t size; char name[132]; } *v = NULL;
	uint64_t total = 0;
	size_t n = 0, i, j;
	struct dirent *d;
	struct stat st;
	struct item t;
	int dfd;
	DIR *dir = opendir(c->dir);

	if (!dir)
		return;
	dfd = dirfd(dir);
	v = calloc(MAX_EVICT, sizeof(*v));
	while (v && n < MAX_EVICT && (d = readdir(dir))) {
		if (d->d_name[0] == '.' && strstr(d->d_name, ".tmp") &&
		    fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    st.st_mtime + TMP_AGE < time(NULL)) {
			(void)unlinkat(dfd, d->d_name, 0);
			continue;
		}
		if (d->d_name[0] == '.' || strlen(d->d_name) >= sizeof(v->name) ||
		    strspn(d->d_name, "0123456789abcdef") != strlen(d->d_name) ||
		    fstatat(dfd, d->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		v[n].t = st.st_mtime;
		v[n].size = st.st_size;
		snprintf(v[n].name, sizeof(v[n].name), "%s", d->d_name);
		total += (uint64_t)st.st_size;
		n++;
	}
	/* Oldest first (few files: insertion sort). */
	for (i = 1; i < n; i++)
		for (j = i, t = v[i]; j > 0 && v[j - 1].t > t.t; j--) {
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	for (i = 0; i < n && total > c->cap; i++)
		if (unlinkat(dfd, v[i].name, 0) == 0) {
			total -= (uint64_t)v[i].size;
			ps_debug("symbol cache: removed %s (least recently used)", v[i].name);
		}
	free(v);
	closedir(dir);
}

static int
write_all(int fd, const void *p, size_t n)
{
	const char *s = p;
	ssize_t w;

	while (n) {
		w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int
ps_symcache_save(struct ps_symcache *c)
{
	char tmp[PATH_MAX + 32];
	struct head h;
	uint64_t size;
	int fd, rc;

	if (!c || !c->dirty)
		return 0;
	if (c->full)
		return -ENOSPC;
	/* What others wrote since this one was loaded stays. */
	rc = load(c);
	if (rc == -ENOSPC)
		c->full = 1;
	if (rc)
		return rc;
	size = sizeof(h) + (uint64_t)c->nent * sizeof(*c->ent) +
	       (uint64_t)c->nframe * sizeof(*c->frame) + c->npool;
	if (size > MAX_FILE || size > c->cap) {
		c->full = 1;  /* kept in memory for this process only */
		return -ENOSPC;
	}
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, MAGIC, 8);
	h.order = ORDER;
	h.idlen = c->idlen;
	memcpy(h.id, c->id, c->idlen);
	h.nent = c->nent;
	h.nframe = c->nframe;
	h.npool = c->npool;
	h.flags = c->flags;
	h.sum = body_sum(&h, c->ent, c->nent, c->frame, c->nframe, c->pool, c->npool);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", c->dir, strrchr(c->path, '/') + 1,
		 (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)  /* an earlier process of this pid's */
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = write_all(fd, &h, sizeof(h));
	if (!rc)
		rc = write_all(fd, c->ent, c->nent * sizeof(*c->ent));
	if (!rc)
		rc = write_all(fd, c->frame, c->nframe * sizeof(*c->frame));
	if (!rc)
		rc = write_all(fd, c->pool, c->npool);
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, c->path))
		rc = -errno;
	if (rc) {
		(void)unlink(tmp);
		return rc;
	}
	c->dirty = 0;
	evict(c);
	return 0;
}

void
ps_symcache_free(struct ps_symcache *c)
{
	int rc;

	if (!c)
		return;
	rc = ps_symcache_save(c);
	if (rc)
		ps_debug("symbol cache %s not written: %s", c->path, strerror(-rc));
	if (c->img) {
		(void)munmap(c->img, c->img_len);
	} else {
		free(c->ent);
		free(c->frame);
		free(c->pool);
	}
	free(c->strs);
	free(c);
}

/* ---- caches shared by every symbol reader of this process ------------- */

static void
shared_free(struct ps_shared *e)
{
	ps_symcache_free(PS_SHARED_ENTRY(e, struct ps_symcache, sh));  /* saves it */
}

/* The caches opened through ps_symcache_get, in use or idle.  Owned by
 * whoever holds the worker's lock (uploader/worker.c), as every use of
 * symbols is. */
static struct ps_shared_set shared = { .max_idle = PS_SYMCACHE_IDLE, .free = shared_free };

int
ps_symcache_get(const char *dir, const uint8_t *id, size_t idlen, uint64_t cap,
		struct ps_symcache **out, int *opened)
{
	struct ps_symcache *c;
	struct ps_shared *h;
	int rc;

	*opened = 0;
	for (h = shared.head; h; h = h->next) {
		c = PS_SHARED_ENTRY(h, struct ps_symcache, sh);
		if (c->idlen == idlen && memcmp(c->id, id, idlen) == 0 && strcmp(c->dir, dir) == 0) {
			ps_shared_hold(&shared, h);
			*out = c;
			return 0;
		}
	}
	rc = ps_symcache_open(dir, id, idlen, cap, &c);
	if (rc)
		return rc;
	ps_shared_add(&shared, &c->sh);
	*opened = 1;
	*out = c;
	return 0;
}

void
ps_symcache_hold(struct ps_symcache *c)
{
	ps_shared_hold(&shared, &c->sh);
}

void
ps_symcache_put(struct ps_symcache *c)
{
	if (c)
		ps_shared_release(&shared, &c->sh, 1);
}

uint32_t
ps_symcache_flags(const struct ps_symcache *c)
{
	return c->flags;
}

void
ps_symcache_set_flags(struct ps_symcache *c, uint32_t flags)
{
	if ((c->flags | flags) != c->flags && !c->full) {
		c->flags |= flags;
		c->dirty = 1;
	}
}

void
ps_symcache_get_stats(const struct ps_symcache *c, struct ps_symcache_stats *st)
{
	st->ranges = c->nent;
	st->fits = !c->full && sizeof(struct head) + (uint64_t)c->nent * sizeof(*c->ent) +
		   (uint64_t)c->nframe * sizeof(*c->frame) + c->npool <= c->cap;
	st->loaded = c->loaded;
	st->rejected = c->rejected;
}

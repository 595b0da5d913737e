/* modules.h -- the objects loaded in the program, sorted by address.
 *
 * Read from dl_iterate_phdr and, in the uploader's helper process, from the
 * program's /proc/PID/maps (ps_symbols_watch): the objects a program the
 * helper was forked from loaded later, or all of a program it is no copy
 * of.  Re-read when an IP
 * falls in none of them, at most once per second unless marked stale.  A
 * re-read keeps the symbol tables of objects still loaded at the same
 * place, so a dlopen storm does not make libc's table be parsed again.
 *
 * Context: the uploader only; allocates.
 */
#ifndef PS_MODULES_H
#define PS_MODULES_H

#include <link.h>
#include <stdint.h>
#include "common/ps.h"
#include "symbolize/symbols.h"

enum { PS_MOD_NEW = 0, PS_MOD_READY = 1, PS_MOD_NOFILE = 2 };

struct ps_module {
	uintptr_t lo, hi;       /* absolute range of the PT_LOAD segments */
	uintptr_t bias;         /* dlpi_addr: runtime - link-time address */
	char *path;             /* owned; file to read, NULL if none */
	char *base;             /* owned; shown in "base+0xoff" */
	char *shown;            /* owned; the object's name in a profile's
				 * Mapping: its file ("/proc/self/exe" resolved),
				 * or "[vdso]", "[anon]" when it has none */
	ElfW(Phdr) *phdr;       /* owned copy; NULL: do not check the file */
	uint32_t phnum;
	int state;              /* PS_MOD_*; obj is set when PS_MOD_READY */
	struct ps_object *obj;  /* owned (ps_object_get), or NULL */
};

struct ps_modules {
	struct ps_module *v;    /* owned; n entries sorted by lo */
	uint32_t n;
	int stale;              /* re-read the object list at the next miss */
	int moved;              /* set when a re-read found an object gone or
				 * moved: the caller's cached names may be wrong */
	uint64_t last_scan;     /* CLOCK_MONOTONIC ns of the last scan */
	uint64_t scans;         /* object-list walks, for the stats */
	int err;                /* -ENOMEM while the last walk failed: an ip in
				 * no object may be in one it missed (the next
				 * find walks again) */
	pid_t watched;          /* ps_symbols_watch; 0: this process */
	struct ps_maps_left left; /* where it leaves its maps (text NULL: nowhere) */
	int only;               /* the watched process's objects alone */
};

/* The object that contains ip, re-reading the list if due; NULL if none. */
struct ps_module *ps_modules_find(struct ps_modules *s, uintptr_t ip);

/* Read the object list now.  Returns 0, or -ENOMEM (the list is kept). */
int ps_modules_scan(struct ps_modules *s);

/* The region of the watched program's /proc/PID/maps (this process's own
 * when none is) that holds ip: for code in no loaded object, such as
 * JIT code in anonymous memory.  Fills [*lo, *hi), the file offset, and
 * name[len]: the mapped file, "//anon" for anonymous memory (pprof's name
 * for it), or the kernel's name ("[stack]", "[heap]").
 * Returns 0, or -ENOENT when no region holds ip. */
int ps_modules_region(const struct ps_modules *s, uintptr_t ip, uintptr_t *lo, uintptr_t *hi,
		      uint64_t *off, char *name, size_t len);

/* Release everything; *s is then empty. */
void ps_modules_free(struct ps_modules *s);

#endif

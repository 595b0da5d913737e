/* shared.h -- what a process read once, shared by reference count, the
 * last released kept idle for a while.
 *
 * A tree's helper serves one program after another, and they read the
 * same files: libc's symbol table, its symbol cache file.  Each such thing
 * is an entry of a set, held by every reader that uses it; one nobody
 * holds stays idle, for the next program, until more than max_idle are
 * idle: then the one released longest ago is freed.  The entry embeds a
 * struct ps_shared; the set's free() gets it and frees the whole entry.
 * Readers find entries by walking head / next themselves (they know the
 * key).
 *
 * Context: one owner at a time (in the uploader, whoever holds the
 * worker's lock); allocates nothing.
 */
#ifndef PS_SHARED_H
#define PS_SHARED_H

#include <stddef.h>
#include <stdint.h>

struct ps_shared {
	struct ps_shared *next;
	uint32_t refs;
	uint64_t released;          /* the set's clock at its last release */
};

struct ps_shared_set {
	struct ps_shared *head;
	uint32_t idle;              /* entries nobody holds */
	uint32_t max_idle;
	uint64_t clock;
	void (*free)(struct ps_shared *e);
};

/* The entry that embeds e as member `field` of type `type`. */
#define PS_SHARED_ENTRY(e, type, field) ((type *)(void *)((char *)(e) - offsetof(type, field)))

/* Add e, new, held once. */
void ps_shared_add(struct ps_shared_set *s, struct ps_shared *e);

/* Hold e, found in s, once more. */
void ps_shared_hold(struct ps_shared_set *s, struct ps_shared *e);

/* Let go of one hold of e.  Once nobody holds it, it stays idle if `keep`
 * (0: nobody could find it again, so it is freed at once); then the idle
 * entries released longest ago are freed down to max_idle. */
void ps_shared_release(struct ps_shared_set *s, struct ps_shared *e, int keep);

#endif

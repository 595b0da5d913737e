/* shared.c -- entries shared by reference count.  See shared.h. */
#include "common/shared.h"

void
ps_shared_add(struct ps_shared_set *s, struct ps_shared *e)
{
	e->refs = 1;
	e->next = s->head;
	s->head = e;
}

void
ps_shared_hold(struct ps_shared_set *s, struct ps_shared *e)
{
	if (e->refs++ == 0)
		s->idle--;
}

/* Unlink the entry *p points to and free it. */
static void
drop(struct ps_shared_set *s, struct ps_shared **p)
{
	struct ps_shared *e = *p;

	*p = e->next;
	if (e->refs == 0)
		s->idle--;
	s->free(e);
}

void
ps_shared_release(struct ps_shared_set *s, struct ps_shared *e, int keep)
{
	struct ps_shared **p, **old;

	if (--e->refs > 0)
		return;
	e->released = ++s->clock;
	s->idle++;
	if (!keep) {
		for (p = &s->head; *p != e; p = &(*p)->next)
			;
		drop(s, p);
	}
	while (s->idle > s->max_idle) {
		old = NULL;
		for (p = &s->head; *p; p = &(*p)->next)
			if ((*p)->refs == 0 && (!old || (*p)->released < (*old)->released))
				old = p;
		drop(s, old);
	}
}

/* altstack.c -- the shim's alternate signal stacks.  See altstack.h. */
#include "shim/altstack.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/log.h"

#define MAX_LIVE 1024   /* live stacks measurable at exit; more are measured
			 * when their thread ends */

/* The calling thread's stack from this module, or NULL.  Owned by the
 * thread. */
static PS_TLS char *t_stack;
/* The largest use seen on a stack that was freed; any thread. */
static _Atomic size_t max_used;
/* The stacks in use, so that ps_altstack_max_used sees the threads that
 * never end before the process does (a Go program's).  A slot is claimed
 * by the thread that owns the stack and cleared by it before the stack is
 * freed; any thread reads them.  Kept only when the debug log, the one
 * reader, is on: otherwise every process would write a page of it for
 * nothing. */
static PS_LARGE _Atomic(char *) live[MAX_LIVE];

/* Bytes written on a stack: mmap gives zeroes, and a stack grows down
 * from its top, so the untouched part is the run of zeroes at the bottom.
 * (A handler that writes zeroes at its deepest point makes this an
 * underestimate by those bytes.) */
static size_t
used(const char *base)
{
	size_t i = 0;

	while (i < PS_ALTSTACK_SIZE && base[i] == 0)
		i++;
	return PS_ALTSTACK_SIZE - i;
}

/* used() of another thread's stack, which its thread may free meanwhile:
 * read through the kernel, which fails instead of faulting.  0 if it
 * cannot be read. */
static size_t
used_elsewhere(const char *base)
{
	char page[4096];
	struct iovec local = { page, sizeof(page) }, remote;
	size_t off, i;

	for (off = 0; off < PS_ALTSTACK_SIZE; off += sizeof(page)) {
		remote.iov_base = (void *)(base + off);
		remote.iov_len = sizeof(page);
		if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof(page))
			return 0;
		for (i = 0; i < sizeof(page); i++)
			if (page[i])
				return PS_ALTSTACK_SIZE - off - i;
	}
	return 0;
}

static void
track(char *base, char *was)
{
	size_t i;

	for (i = 0; i < MAX_LIVE; i++) {
		char *expect = was;

		if (atomic_compare_exchange_strong(&live[i], &expect, base))
			return;
	}
}

static void
note_used(const char *base)
{
	size_t u = used(base), m = atomic_load(&max_used);

	while (u > m && !atomic_compare_exchange_weak(&max_used, &m, u))
		;
}

void
ps_altstack_thread_end(void)
{
	stack_t off = { .ss_flags = SS_DISABLE }, cur;
	char *guard;

	if (!t_stack)
		return;
	/* Only if it is still ours: the program may have put its own. */
	if (sigaltstack(NULL, &cur) || cur.ss_sp != t_stack || (cur.ss_flags & SS_ONSTACK))
		return;
	if (sigaltstack(&off, NULL))
		return;
	if (ps_log_level() >= PS_LOG_DEBUG)
		track(NULL, t_stack);   /* before it is freed: no longer measured live */
	note_used(t_stack);
	guard = t_stack - sysconf(_SC_PAGESIZE);
	(void)munmap(guard, PS_ALTSTACK_SIZE + (size_t)sysconf(_SC_PAGESIZE));
	t_stack = NULL;
}

void
ps_altstack_thread_start(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	stack_t cur, ss;
	char *m;

	if (t_stack || sigaltstack(NULL, &cur))
		return;
	if (!(cur.ss_flags & SS_DISABLE) && cur.ss_size >= PS_ALTSTACK_SIZE)
		return;
	if (cur.ss_flags & SS_ONSTACK)
		return;
	m = mmap(NULL, PS_ALTSTACK_SIZE + page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return;
	if (mprotect(m, page, PROT_NONE)) {
		(void)munmap(m, PS_ALTSTACK_SIZE + page);
		return;
	}
	ss.ss_sp = m + page;
	ss.ss_size = PS_ALTSTACK_SIZE;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL)) {
		(void)munmap(m, PS_ALTSTACK_SIZE + page);
		return;
	}
	t_stack = m + page;
	if (ps_log_level() >= PS_LOG_DEBUG)
		track(t_stack, NULL);
}

size_t
ps_altstack_max_used(void)
{
	size_t m = atomic_load(&max_used), u, i;
	char *p;

	for (i = 0; i < MAX_LIVE; i++) {
		p = atomic_load(&live[i]);
		u = !p ? 0 : p == t_stack ? used(p) : used_elsewhere(p);
		if (u > m)
			m = u;
	}
	return m;
}

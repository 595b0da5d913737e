/* jit.c -- code that lives in no loaded object, as a JIT compiler makes it
 * (test_lines.py): a countdown loop copied into anonymous executable
 * memory and called for about MS milliseconds of CPU.  Prints "ok". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* x86-64: loop: dec %rdi; jnz loop; ret */
static const unsigned char code[] = { 0x48, 0xff, 0xcf, 0x75, 0xfb, 0xc3 };

int
main(int argc, char **argv)
{
	double ms = argc > 1 ? atof(argv[1]) : 300;
	struct timespec t0, t;
	void (*fn)(uint64_t);
	void *p;

	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	memcpy(p, code, sizeof(code));
	fn = (void (*)(uint64_t))p;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	do {
		fn(1000000);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) / 1e6 < ms);
	printf("ok\n");
	return 0;
}

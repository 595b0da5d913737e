/* bigheap: hold MIB mebibytes of live heap in 4 KiB-ish blocks (every page
 * touched, so it is resident), then free it and exit.  The peak RSS of the
 * run minus that of the same run without a profiler is what the profiler
 * adds: its live-block table, stack table and threads.
 *
 * usage: bigheap MIB
 */
#include <stdlib.h>
#include <string.h>

int
main(int argc, char **argv)
{
	size_t total, n, i;
	char **blocks;

	if (argc != 2)
		return 2;
	total = (size_t)atol(argv[1]) << 20;
	/* Sizes alternate 2, 4 and 6 KiB: a mix, 4 KiB on average. */
	n = total / 4096;
	blocks = calloc(n + 1, sizeof(*blocks));
	if (!blocks)
		return 1;
	for (i = 0; i < n; i++) {
		size_t sz = 2048 * (1 + i % 3);

		blocks[i] = malloc(sz);
		if (!blocks[i])
			return 1;
		memset(blocks[i], (int)i, sz);
	}
	for (i = 0; i < n; i++)
		free(blocks[i]);
	free(blocks);
	return 0;
}

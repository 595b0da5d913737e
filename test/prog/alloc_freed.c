/* alloc_freed: one large block (8 MiB: sampled at any rate the tests use),
 * written and freed; nothing of the program's is live at its end.  Its
 * allocation profile has a sample, its in-use series none. */
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

int
main(void)
{
	sink = malloc(8u << 20);
	if (!sink)
		return 1;
	memset(sink, 1, 8u << 20);
	free(sink);
	return 0;
}

/* errno_at_main: prints errno as main finds it (the shim's constructor
 * runs before main and must not leave an errno of its own behind).
 * usage: errno_at_main */
#include <errno.h>
#include <stdio.h>

int
main(void)
{
	printf("%d\n", errno);
	return 0;
}

/* own_listener: a server that closes every descriptor it did not open
 * (as daemons and container inits do, closefrom(3)), then listens on its
 * own port and answers each connection "app:hello\n".
 * usage: own_listener PORT N   -- serve N connections, then exit 0.
 * Prints "listening" once its socket listens. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int one = 1, s, c, i, n = argc > 2 ? atoi(argv[2]) : 1;

	if (argc < 2)
		return 2;
	closefrom(3);
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return 1;
	(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 16))
		return 1;
	printf("listening on fd %d\n", s);
	fflush(stdout);
	for (i = 0; i < n; i++) {
		c = accept(s, NULL, NULL);
		if (c < 0)
			return 1;
		if (write(c, "app:hello\n", 10) != 10)
			return 1;
		close(c);
	}
	return 0;
}

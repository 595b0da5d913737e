/* traceparent.c -- pyroshim-traceparent, pyrorun's one-line question to
 * the library's own W3C rules (trace/traceparent.c), so that the rules are
 * said once and pyrorun cannot accept a TRACEPARENT the shim refuses.
 *
 *   pyroshim-traceparent VALUE
 *
 * prints "TRACE_ID PARENT_ID" (lowercase hex) and exits 0 when VALUE is a
 * valid traceparent, exits 1 silently when it is not, 2 on bad usage.
 */
#include <stdio.h>

#include "trace/traceparent.h"

int
main(int argc, char **argv)
{
	struct ps_traceparent tp;
	char trace[33], parent[17];

	if (argc != 2) {
		fputs("usage: pyroshim-traceparent VALUE\n", stderr);
		return 2;
	}
	if (ps_traceparent_parse(argv[1], &tp))
		return 1;
	ps_hex_encode(tp.trace_id, sizeof(tp.trace_id), trace);
	ps_hex_encode(tp.span_id, sizeof(tp.span_id), parent);
	return printf("%s %s\n", trace, parent) < 0 || fflush(stdout) ? 1 : 0;
}

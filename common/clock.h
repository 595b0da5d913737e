/* clock.h -- a clock read in nanoseconds: the one helper for every clock
 * the shim reads (monotonic, wall, process and thread CPU time). */
#ifndef PS_CLOCK_H
#define PS_CLOCK_H

#include <stdint.h>
#include <time.h>
#include "common/ps.h"

/* clock_gettime(id) in ns; 0 if the clock cannot be read.
 * Context: any; async-signal-safe. */
PS_SIGSAFE static inline uint64_t
ps_clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif

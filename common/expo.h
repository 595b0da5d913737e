/* expo.h -- the arithmetic of exponential sampling, without libm.
 *
 * The samplers draw exponential distances, -ln(u) * mean, and weight what
 * they keep by 1 / (1 - e^-x).  These are the only two functions the
 * library took from libm, and loading libm.so.6 costs every process about
 * 55 us of start-up (BENCHMARKS.md section 14g), which is a fifth of
 * what a short process may spend on the profiler.  So they are computed
 * here, to within a few units in the last place of libm's, which the unit
 * tests check (test/check_tables.c).
 *
 * Context: any thread; async-signal-safe (pure functions, no errno).
 */
#ifndef PS_EXPO_H
#define PS_EXPO_H

#include <stdint.h>
#include <string.h>
#include "common/ps.h"

#define PS_LN2_HI 6.93147180369123816490e-01  /* ln 2, first 32 bits */
#define PS_LN2_LO 1.90821492927058770002e-10  /* ln 2 - PS_LN2_HI */

/* -ln(u) for u in [2^-1022, 1] (u from 53 random bits: never 0).
 * u = m 2^e with m = 1 + f in [sqrt(1/2), sqrt(2)), f exact; ln m =
 * 2 atanh(s) with s = f / (2 + f), |s| < 0.172: the series to s^17 leaves
 * < 1e-16.  As fdlibm does, 2s = f - s f is used to write it as f minus a
 * small correction, so that its rounding errors do not reach f's bits. */
PS_SIGSAFE static inline double
ps_expo_neglog(double u)
{
	uint64_t b;
	double m, f, s, s2, t;
	int e;

	memcpy(&b, &u, sizeof(b));
	e = (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	memcpy(&m, &b, sizeof(m));
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	f = m - 1.0;
	s = f / (2.0 + f);
	s2 = s * s;
	t = s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 + s2 * (1.0 / 11 +
	    s2 * (1.0 / 13 + s2 * (1.0 / 15 + s2 * (1.0 / 17))))))));
	return -((double)e * PS_LN2_HI + (f - (s * (f - 2.0 * t) - (double)e * PS_LN2_LO)));
}

/* 1 - e^-x for x >= 0 (0 for anything else, NaN included): the chance
 * that an exponential sampler of mean 1 stops within x. */
PS_SIGSAFE static inline double
ps_expo_p(double x)
{
	double r, er, scale;
	uint64_t b;
	int k;

	if (!(x > 0))
		return 0;
	if (x < 0.5) {
		/* -expm1(-x) by its series, to x^14 / 14!: < 1e-17 left. */
		double y = -x, q = 1.0;
		int i;

		for (i = 14; i >= 2; i--)
			q = 1.0 + y / i * q;
		return -(y * q);
	}
	if (x > 745.0)
		return 1.0;
	/* e^-x = 2^k e^r, |r| <= ln(2) / 2, k in [-1075, -1]. */
	k = -(int)(x / (PS_LN2_HI + PS_LN2_LO) + 0.5);
	r = (-x - (double)k * PS_LN2_HI) - (double)k * PS_LN2_LO;
	er = 1.0;
	for (int i = 16; i >= 1; i--)
		er = 1.0 + r / i * er;
	if (k < -1021)
		return 1.0;  /* e^-x < 2^-1021: 1 - it rounds to 1 */
	b = (uint64_t)(k + 1023) << 52;
	memcpy(&scale, &b, sizeof(scale));
	return 1.0 - er * scale;
}

#endif

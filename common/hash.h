/* hash.h -- the hashes of pyroshim's open-addressing tables.
 *
 * ps_hash_bytes is FNV-1a over bytes: names, stacks of ids.  ps_hash_mix
 * spreads an address, whose low bits are mostly alignment, over all bits
 * (the first half of MurmurHash3's 64-bit finalizer).  Neither is for
 * data an attacker chooses to collide: the tables they index are capped.
 *
 * Context: any thread; async-signal-safe (pure functions).
 */
#ifndef PS_HASH_H
#define PS_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t
ps_hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ *s++) * 0x100000001b3ull;
	return h;
}

static inline uint64_t
ps_hash_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

#endif

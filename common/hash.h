/* hash.h -- the hashes of pyroshim's open-addressing tables.
 *
 * ps_hash_bytes is FNV-1a over bytes: names, stacks of ids.  ps_hash_mix
 * spreads an address, whose low bits are mostly alignment, over all bits
 * (the first half of MurmurHash3's 64-bit finalizer).  Neither is for
 * data an attacker chooses to collide: the tables they index are capped.
 * ps_hash_xxh64 is XXH64 (xxHash's specification, seeded): the check of
 * the symbol cache's files, megabytes that every helper reads, at several
 * times zlib's CRC-32's speed.
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

#define PS_XXH_P1 11400714785074694791ull
#define PS_XXH_P2 14029467366897019727ull
#define PS_XXH_P3 1609587929392839161ull
#define PS_XXH_P4 9650029242287828579ull
#define PS_XXH_P5 2870177450012600261ull

static inline uint64_t
ps_xxh_rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t
ps_xxh_round(uint64_t acc, uint64_t in)
{
	return ps_xxh_rotl(acc + in * PS_XXH_P2, 31) * PS_XXH_P1;
}

static inline uint64_t
ps_xxh_merge(uint64_t acc, uint64_t v)
{
	return (acc ^ ps_xxh_round(0, v)) * PS_XXH_P1 + PS_XXH_P4;
}

/* Little-endian reads, unaligned: the file's bytes as xxHash defines them. */
static inline uint64_t
ps_xxh_read64(const unsigned char *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
	       (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 |
	       (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

/* By offsets into data, never past them: data may be NULL when n is 0 (an
 * empty array), where even NULL + 0 is undefined. */
static inline uint64_t
ps_hash_xxh64(const void *data, size_t n, uint64_t seed)
{
	const unsigned char *b = data;
	uint64_t h, v1, v2, v3, v4;
	size_t i = 0;

	if (n >= 32) {
		v1 = seed + PS_XXH_P1 + PS_XXH_P2;
		v2 = seed + PS_XXH_P2;
		v3 = seed;
		v4 = seed - PS_XXH_P1;
		do {
			v1 = ps_xxh_round(v1, ps_xxh_read64(b + i));
			v2 = ps_xxh_round(v2, ps_xxh_read64(b + i + 8));
			v3 = ps_xxh_round(v3, ps_xxh_read64(b + i + 16));
			v4 = ps_xxh_round(v4, ps_xxh_read64(b + i + 24));
			i += 32;
		} while (n - i >= 32);
		h = ps_xxh_rotl(v1, 1) + ps_xxh_rotl(v2, 7) + ps_xxh_rotl(v3, 12) +
		    ps_xxh_rotl(v4, 18);
		h = ps_xxh_merge(h, v1);
		h = ps_xxh_merge(h, v2);
		h = ps_xxh_merge(h, v3);
		h = ps_xxh_merge(h, v4);
	} else {
		h = seed + PS_XXH_P5;
	}
	h += (uint64_t)n;
	for (; n - i >= 8; i += 8)
		h = ps_xxh_rotl(h ^ ps_xxh_round(0, ps_xxh_read64(b + i)), 27) * PS_XXH_P1 + PS_XXH_P4;
	if (n - i >= 4) {
		h ^= (uint64_t)(b[i] | (uint32_t)b[i + 1] << 8 | (uint32_t)b[i + 2] << 16 |
				(uint32_t)b[i + 3] << 24) * PS_XXH_P1;
		h = ps_xxh_rotl(h, 23) * PS_XXH_P2 + PS_XXH_P3;
		i += 4;
	}
	for (; i < n; i++)
		h = ps_xxh_rotl(h ^ b[i] * PS_XXH_P5, 11) * PS_XXH_P1;
	h ^= h >> 33;
	h *= PS_XXH_P2;
	h ^= h >> 29;
	h *= PS_XXH_P3;
	h ^= h >> 32;
	return h;
}

#endif

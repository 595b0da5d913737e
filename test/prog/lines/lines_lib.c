/* lines_lib.c -- the shared library of test/prog/lines (test_lines.py):
 * one hot loop on a known line, marked HOT. */
#include <stdint.h>

uint64_t lib_spin(uint64_t n);

uint64_t
lib_spin(uint64_t n)
{
	uint64_t acc = 7, i;

	for (i = 0; i < n; i++)
		acc = acc * 3202034522624059733ull + (acc >> 29);   /* HOT: lib */
	return acc;
}

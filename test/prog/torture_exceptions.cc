// torture_exceptions: THREADS threads each throw and catch ITERS C++
// exceptions through a few frames, at once.  The unwinder behind `throw`
// (libgcc's _Unwind_*) calls dl_iterate_phdr / _dl_find_object and holds
// loader state while a SIGPROF may land and the shim unwinds the same
// stack with libunwind; Debian's libunwind also exports _Unwind_* and must
// never take over the program's exception handling (README, "How it
// works").  Every thread also allocates (the exception objects and a
// string per iteration), so the allocation hooks run inside the throw path.
// usage: torture_exceptions THREADS ITERS
// prints "ok CAUGHT SUM"; exits 1 if any exception was lost or mangled.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Oops : std::runtime_error {
	long value;
	Oops(long v, const std::string &what) : std::runtime_error(what), value(v) {}
};

std::atomic<long> caught{0};
std::atomic<long> mangled{0};

__attribute__((noinline)) long burn(long i)
{
	volatile double x = 1;
	for (int k = 0; k < 2000; k++)
		x = x * 1.0000001 + 0.5;
	return i * 7 + (x > 0);
}

__attribute__((noinline)) void level3(long i)
{
	long v = burn(i);
	if (i % 5 == 4)
		throw std::out_of_range("range " + std::to_string(v));
	throw Oops(v, "oops " + std::to_string(v));
}

__attribute__((noinline)) void level2(long i)
{
	std::string guard(64, 'g');  // a destructor to run during unwinding
	level3(i);
}

__attribute__((noinline)) void level1(long i)
{
	try {
		level2(i);
	} catch (const std::out_of_range &) {
		throw;  // rethrown: a second unwind of the same exception
	}
}

void worker(long t, long iters, long *sum)
{
	for (long i = 0; i < iters; i++) {
		long n = t * iters + i;
		try {
			level1(n);
			mangled++;
		} catch (const Oops &e) {
			if (e.value != n * 7 + 1 || std::string(e.what()) != "oops " + std::to_string(e.value))
				mangled++;
			*sum += e.value;
			caught++;
		} catch (const std::out_of_range &e) {
			if (std::string(e.what()) != "range " + std::to_string(n * 7 + 1))
				mangled++;
			*sum += n * 7 + 1;
			caught++;
		}
	}
}

}  // namespace

int main(int argc, char **argv)
{
	long threads = argc > 1 ? std::atol(argv[1]) : 4, iters = argc > 2 ? std::atol(argv[2]) : 20000;
	std::vector<std::thread> ts;
	std::vector<long> sums(static_cast<size_t>(threads), 0);
	long sum = 0, want = 0;

	for (long t = 0; t < threads; t++)
		ts.emplace_back(worker, t, iters, &sums[static_cast<size_t>(t)]);
	for (auto &t : ts)
		t.join();
	for (long s : sums)
		sum += s;
	for (long n = 0; n < threads * iters; n++)
		want += n * 7 + 1;
	if (caught != threads * iters || mangled != 0 || sum != want) {
		std::fprintf(stderr, "caught %ld of %ld, %ld mangled, sum %ld want %ld\n",
			     caught.load(), threads * iters, mangled.load(), sum, want);
		return 1;
	}
	std::printf("ok %ld %ld\n", caught.load(), sum);
	return 0;
}

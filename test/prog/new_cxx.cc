// new_cxx: C++ allocations through operator new, for the allocation
// profile's C++ test.  Cache's constructor calls fill(), which does `new`
// of a few sizes in a loop and grows a std::vector; the profile must show
// operator new (libstdc++) called from Cache::fill(int).
// usage: new_cxx ROUNDS   prints "ok CHECKSUM", exit 0
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

namespace {
volatile unsigned long long sink;
}

class Cache {
public:
	explicit Cache(int rounds) { fill(rounds); }
	~Cache()
	{
		for (char *b : blocks_)
			delete[] b;
	}
	__attribute__((noinline)) void fill(int rounds);
	unsigned long long sum() const { return sum_; }

private:
	std::vector<char *> blocks_;
	std::vector<long> grown_;
	unsigned long long sum_ = 0;
};

void
Cache::fill(int rounds)
{
	static const size_t sizes[] = { 24, 200, 3000, 40000 };

	for (int r = 0; r < rounds; r++) {
		for (size_t n : sizes) {
			char *b = new char[n];
			b[0] = static_cast<char>(r);
			b[n - 1] = 1;
			sum_ += static_cast<unsigned long long>(b[n - 1]);
			blocks_.push_back(b);
		}
		// Growth from empty each round: every reallocation of the
		// vector goes through operator new.
		std::vector<long> v;
		for (long i = 0; i < 5000; i++)
			v.push_back(i);
		sum_ += static_cast<unsigned long long>(v.back());
		grown_.swap(v);
		auto owned = std::make_unique<long[]>(512);
		owned[0] = r;
		sink = static_cast<unsigned long long>(owned[0]);
		// Keep the live set small: drop all but the newest blocks.
		if (blocks_.size() > 64) {
			for (size_t i = 0; i + 4 < blocks_.size(); i++)
				delete[] blocks_[i];
			blocks_.erase(blocks_.begin(), blocks_.end() - 4);
		}
	}
}

int
main(int argc, char **argv)
{
	int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
	Cache c(rounds);

	std::printf("ok %llu\n", c.sum());
	return 0;
}

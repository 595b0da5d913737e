/* family.c -- the two profile families, as one table.  See profiles.h. */
#include "uploader/profiles.h"

static const char *const cpu_types[] = { "samples", "cpu" };
static const char *const cpu_units[] = { "count", "nanoseconds" };
static const int cpu_vals[] = { PS_F_CPU_SAMPLES, PS_F_CPU_NS };
static const int64_t cpu_div[] = { 1, 1 };
static const int cpu_present[] = { PS_F_CPU_SAMPLES };
/* Folded CPU values are nanoseconds: sampleRate=1e9 makes the server's
 * 1e9/sampleRate scaling 1. */
static const struct ps_series cpu_series[] = {
	{ "cpu", PS_F_CPU_NS, 1, "samples", "sum", 1000000000u },
};

static const char *const alloc_types[] = { "alloc_objects", "alloc_space", "inuse_objects",
					   "inuse_space" };
static const char *const alloc_units[] = { "count", "bytes", "count", "bytes" };
static const int alloc_vals[] = { PS_F_ALLOC_OBJS, PS_F_ALLOC_BYTES, PS_F_INUSE_OBJS,
				  PS_F_INUSE_BYTES };
static const int64_t alloc_div[] = { PS_FIXED_ONE, 1, PS_FIXED_ONE, 1 };
static const int alloc_present[] = { PS_F_ALLOC_OBJS, PS_F_INUSE_OBJS };
/* In-use types are a snapshot: averaged over time by the server. */
static const struct ps_series alloc_series[] = {
	{ "alloc_objects", PS_F_ALLOC_OBJS, PS_FIXED_ONE, "objects", "sum", 0 },
	{ "alloc_space", PS_F_ALLOC_BYTES, 1, "bytes", "sum", 0 },
	{ "inuse_objects", PS_F_INUSE_OBJS, PS_FIXED_ONE, "objects", "average", 0 },
	{ "inuse_space", PS_F_INUSE_BYTES, 1, "bytes", "average", 0 },
};
/* What the server is told about the allocation sample types, as the Go SDK
 * does: in-use types are averaged over time, the others summed. */
static const char alloc_type_config[] =
	"{\"alloc_objects\":{\"units\":\"objects\"},"
	"\"alloc_space\":{\"units\":\"bytes\"},"
	"\"inuse_objects\":{\"units\":\"objects\",\"aggregation\":\"average\"},"
	"\"inuse_space\":{\"units\":\"bytes\",\"aggregation\":\"average\"}}";

/* Off-CPU time (shim/wait.h): the sample types of Go's block and mutex
 * profiles, period contentions/count 1 as Go writes them.  The server names
 * a pprof's profile type from the display names of sample_type_config
 * (block_count -> "block", mutex_count -> "mutex"), and a folded upload
 * from the last part of its name, as for pyroscope-go. */
static const char *const wait_types[] = { "contentions", "delay" };
static const char *const wait_units[] = { "count", "nanoseconds" };
static const int64_t wait_div[] = { PS_FIXED_ONE, 1 };
static const int block_vals[] = { PS_F_BLOCK_COUNT, PS_F_BLOCK_NS };
static const int block_present[] = { PS_F_BLOCK_COUNT };
static const struct ps_series block_series[] = {
	{ "block_count", PS_F_BLOCK_COUNT, PS_FIXED_ONE, "lock_samples", "sum", 0 },
	{ "block_duration", PS_F_BLOCK_NS, 1, "lock_nanoseconds", "sum", 0 },
};
static const char block_type_config[] =
	"{\"contentions\":{\"display-name\":\"block_count\",\"units\":\"lock_samples\"},"
	"\"delay\":{\"display-name\":\"block_duration\",\"units\":\"lock_nanoseconds\"}}";
static const int mutex_vals[] = { PS_F_MUTEX_COUNT, PS_F_MUTEX_NS };
static const int mutex_present[] = { PS_F_MUTEX_COUNT };
static const struct ps_series mutex_series[] = {
	{ "mutex_count", PS_F_MUTEX_COUNT, PS_FIXED_ONE, "lock_samples", "sum", 0 },
	{ "mutex_duration", PS_F_MUTEX_NS, 1, "lock_nanoseconds", "sum", 0 },
};
static const char mutex_type_config[] =
	"{\"contentions\":{\"display-name\":\"mutex_count\",\"units\":\"lock_samples\"},"
	"\"delay\":{\"display-name\":\"mutex_duration\",\"units\":\"lock_nanoseconds\"}}";

const struct ps_family ps_family_cpu = {
	.id = PS_FAMILY_CPU,
	.kind = "cpu",
	.metric = "process_cpu",
	.types = cpu_types,
	.units = cpu_units,
	.fold_values = cpu_vals,
	.div = cpu_div,
	.nvalues = PS_ARRAY_LEN(cpu_vals),
	.period_type = "cpu",
	.period_unit = "nanoseconds",
	.default_type = "cpu",
	.present = cpu_present,
	.npresent = PS_ARRAY_LEN(cpu_present),
	.ingest_units = "samples",
	.rate_query = 1,
	.type_config = NULL,
	.series = cpu_series,
	.nseries = PS_ARRAY_LEN(cpu_series),
};

const struct ps_family ps_family_alloc = {
	.id = PS_FAMILY_ALLOC,
	.kind = "alloc",
	.metric = "memory",
	.types = alloc_types,
	.units = alloc_units,
	.fold_values = alloc_vals,
	.div = alloc_div,
	.nvalues = PS_ARRAY_LEN(alloc_vals),
	.period_type = "space",
	.period_unit = "bytes",
	.default_type = "inuse_space",
	.present = alloc_present,
	.npresent = PS_ARRAY_LEN(alloc_present),
	.ingest_units = "bytes",
	.rate_query = 0,
	.type_config = alloc_type_config,
	.series = alloc_series,
	.nseries = PS_ARRAY_LEN(alloc_series),
};

#define WAIT_FAMILY(fid, name)                                             \
	{                                                               \
		.id = fid, .kind = #name, .metric = #name,   \
		.types = wait_types, .units = wait_units,               \
		.fold_values = name##_vals, .div = wait_div,            \
		.nvalues = PS_ARRAY_LEN(name##_vals),                   \
		.period_type = "contentions", .period_unit = "count",   \
		.default_type = "delay", .present = name##_present,     \
		.npresent = PS_ARRAY_LEN(name##_present),               \
		.ingest_units = "lock_samples", .rate_query = 0,        \
		.type_config = name##_type_config, .series = name##_series, \
		.nseries = PS_ARRAY_LEN(name##_series),                 \
	}
const struct ps_family ps_family_block = WAIT_FAMILY(PS_FAMILY_BLOCK, block);
const struct ps_family ps_family_mutex = WAIT_FAMILY(PS_FAMILY_MUTEX, mutex);

const struct ps_family *const ps_families[PS_NFAMILIES] = {
	[PS_FAMILY_CPU] = &ps_family_cpu,
	[PS_FAMILY_ALLOC] = &ps_family_alloc,
	[PS_FAMILY_BLOCK] = &ps_family_block,
	[PS_FAMILY_MUTEX] = &ps_family_mutex,
};

int
ps_family_present(const struct ps_family *fam, const struct ps_fold *f,
		  const int64_t (*vals)[PS_F_NVALUES])
{
	for (size_t i = 0; i < fam->npresent; i++)
		if (ps_fold_total(f, vals, fam->present[i]) > 0)
			return 1;
	return 0;
}

int64_t
ps_family_period(const struct ps_family *fam, unsigned sample_rate, uint64_t alloc_sample_bytes)
{
	if (fam->id == PS_FAMILY_CPU)
		return sample_rate ? 1000000000ll / sample_rate : 0;
	if (fam->id == PS_FAMILY_ALLOC)
		return (int64_t)alloc_sample_bytes;
	return 1;  /* Go's block and mutex profiles: every kept wait counts */
}

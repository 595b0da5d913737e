/* push.h -- building requests for Pyroscope's push API,
 * `POST {server}/push.v1.PusherService/Push` (grafana/pyroscope
 * api/push/v1/push.proto; what Grafana Alloy's pyroscope.write sends).
 *
 * The Connect protocol, unary call: Content-Type `application/proto`,
 * header `Connect-Protocol-Version: 1`, the body one protobuf message
 *
 *   PushRequest      { repeated RawProfileSeries series = 1; }
 *   RawProfileSeries { repeated LabelPair labels = 1; repeated RawSample samples = 2; }
 *   RawSample        { bytes raw_profile = 1; string ID = 2; }
 *   LabelPair        { string name = 1; string value = 2; }
 *
 * and errors come back as an HTTP status (invalid_argument 400,
 * unauthenticated 401, resource_exhausted 429, unavailable 503...) with a
 * JSON body {"code","message"} -- the same statuses and body shape as
 * /ingest, so upload.c's retry rules apply unchanged.
 *
 * The server (pkg/validation/validate.go ValidateLabels) sorts the labels,
 * then refuses a series without a valid `__name__` or `service_name`,
 * more than 30 labels, a duplicate name, a name that is not
 * [A-Za-z_][A-Za-z0-9_]* once dots are replaced by '_', or a value that
 * is not UTF-8.  `__delta__="false"` tells it the values are already
 * per-interval (otherwise it subtracts successive memory profiles
 * itself).  ps_push_labels() builds a set that passes those rules.
 *
 * Pure formatting: no I/O besides getrandom(2) for the sample's ID.
 */
#ifndef PS_PUSH_H
#define PS_PUSH_H

#include <stddef.h>
#include "common/buf.h"
#include "common/ps.h"
#include "uploader/tags.h"

#define PS_PUSH_PATH "/push.v1.PusherService/Push"
#define PS_PUSH_MAX_LABELS 30  /* the server's default max_label_names_per_series */

struct ps_push_label {
	char name[PS_TAGS_KEY_MAX + 1];
	const char *value;          /* borrowed */
};

/* The labels of one series, sorted by name: `__name__` = profile_name
 * ("process_cpu" or "memory"), `__delta__` = "false", `service_name` = the
 * tag of that name or app, `pyroscope_spy` = "pyroshim" (what /ingest's
 * spyName becomes), then every other tag with '.' in its name replaced by
 * '_' (the server's own sanitisation); a tag whose name then repeats one
 * already present or starts with a digit, or that would pass
 * PS_PUSH_MAX_LABELS, is left out (the first wins) and counted in *dropped.
 * Values are borrowed from the arguments.  Returns the number of labels
 * (<= PS_PUSH_MAX_LABELS).  Context: any thread; does not allocate. */
size_t ps_push_labels(const char *profile_name, const char *app, const struct ps_tags *t,
		      struct ps_push_label *out, unsigned *dropped);

/* Append a PushRequest of one series (the n labels, one sample holding the
 * len bytes of profile -- gzipped pprof -- and a random UUID v4 as its ID)
 * to out.  Returns 0, -EINVAL (NULL or empty profile), -E2BIG / -ENOMEM
 * from the buffer; on failure out->len is restored.
 * Context: any thread outside signal context; may allocate (out). */
int ps_push_request(const struct ps_push_label *labels, size_t n, const void *profile,
		    size_t len, struct ps_buf *out) PS_WUR;

#endif

/*
 * identity - a transform that answers every record with a copy of itself.
 *
 * It exercises the whole SDK path (decode the request, re-encode every
 * record) so that benchmarks compare the cost of the languages' SDKs, not
 * of a plugin's logic.
 */
#include "streamd.h"

static int identity(const streamd_record *in, streamd_emitter *out, streamd_error *err) {
    (void)err;
    return streamd_emit(out, in);
}

STREAMD_TRANSFORM("identity", "1.0.0", identity)

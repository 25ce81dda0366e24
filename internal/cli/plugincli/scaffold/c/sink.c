/*
 * @NAME@: a streamd Wasm sink that "writes" each record by logging it
 * (replace that with the durable write of your destination: a file in a
 * directory granted with dirs, for example) and refuses a record with a
 * null value. Build it with build.sh; test it with `streamd plugin test`
 * (README.md).
 */
#include "streamd.h"

/* write must make the record durable before it returns STREAMD_OK: the
 * pipeline acknowledges what the sink says is written. */
static int write_record(const streamd_record *in, streamd_error *err) {
    if (in->value.data == NULL) return streamd_error_set(err, "null value: nothing to write"); /* not written */
    streamd_log(STREAMD_LOG_DEBUG, (const char *)in->value.data, in->value.len);
    return STREAMD_OK;
}

STREAMD_SINK("@NAME@", "0.1.0", write_record)

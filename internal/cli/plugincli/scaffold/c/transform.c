/*
 * @NAME@: a streamd Wasm transform that upper-cases the ASCII letters of
 * each record's value (after an optional prefix from its config) and
 * rejects a record with a null value. Build it with build.sh; test it with
 * `streamd plugin test` (README.md).
 */
#include "streamd.h"

static streamd_buf prefix; /* from the config */
static streamd_buf out;    /* reused for every record */

/* The config table of the pipeline TOML, as JSON; an error refuses it. */
static int init(streamd_bytes config, streamd_error *err) {
    static const char *const keys[] = {"prefix", NULL};
    streamd_bytes v;
    if (streamd_json_only_keys(config, keys, err) != STREAMD_OK) return STREAMD_ERR_RECORD;
    if (streamd_json_get(config, "prefix", &v) == STREAMD_OK && streamd_json_string(v, &prefix) != STREAMD_OK)
        return streamd_error_set(err, "prefix: want a string");
    return STREAMD_OK;
}

static int upper(const streamd_record *in, streamd_emitter *emit, streamd_error *err) {
    if (in->value.data == NULL) return streamd_error_set(err, "null value"); /* rejects this record */
    out.len = 0;
    if (streamd_buf_append(&out, prefix.data, prefix.len) != STREAMD_OK ||
        streamd_buf_reserve(&out, in->value.len) != STREAMD_OK)
        return STREAMD_ERR_BATCH;
    for (size_t i = 0; i < in->value.len; i++) {
        uint8_t c = in->value.data[i];
        out.data[out.len++] = (c >= 'a' && c <= 'z') ? (uint8_t)(c - 'a' + 'A') : c;
    }
    int rc = streamd_emit_begin(emit, in->timestamp_ms, in->key, streamd_bytes_of(out.data, out.len));
    for (uint32_t i = 0; rc == STREAMD_OK && i < in->header_count; i++)
        rc = streamd_emit_header(emit, in->headers[i].name, in->headers[i].value);
    return rc == STREAMD_OK ? streamd_emit_end(emit) : rc;
}

STREAMD_PLUGIN(.kind = STREAMD_KIND_TRANSFORM, .name = "@NAME@", .version = "0.1.0", .init = init, .transform = upper)

/*
 * orders-downgrade plugin: the streamd transform around downgrade_value.
 * See downgrade.c for the rules.
 */
#include "downgrade.h"

static streamd_buf value_buf, scratch_buf;

static int orders_downgrade(const streamd_record *in, streamd_emitter *out, streamd_error *err) {
    value_buf.len = 0;
    switch (downgrade_value(&value_buf, &scratch_buf, in->value, &err->msg)) {
    case 0:
        break;
    case -1:
        return STREAMD_ERR_RECORD;
    default:
        return STREAMD_ERR_BATCH; /* out of memory */
    }
    const streamd_bytes schema = STREAMD_LIT(DOWNGRADE_SCHEMA_HEADER);
    if (streamd_emit_begin(out, in->timestamp_ms, in->key,
                           streamd_bytes_of(value_buf.data, value_buf.len)) != STREAMD_OK) {
        return STREAMD_ERR_BATCH;
    }
    for (uint32_t i = 0; i < in->header_count; i++) {
        const streamd_header *h = &in->headers[i];
        if (streamd_bytes_eq(h->name, schema)) {
            continue;
        }
        if (streamd_emit_header(out, h->name, h->value) != STREAMD_OK) {
            return STREAMD_ERR_BATCH;
        }
    }
    if (streamd_emit_header(out, schema, STREAMD_LIT("1")) != STREAMD_OK) {
        return STREAMD_ERR_BATCH;
    }
    return streamd_emit_end(out);
}

STREAMD_TRANSFORM("orders-downgrade", "1.0.0", orders_downgrade)

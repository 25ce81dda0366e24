/*
 * downgrade.h - the orders-v2 -> orders-v1 downgrade, as plain C that runs
 * in the Wasm plugin and natively in tests.
 */
#ifndef DOWNGRADE_H
#define DOWNGRADE_H

#include "streamd.h"

/* The header that carries the Fluid schema version. */
#define DOWNGRADE_SCHEMA_HEADER "fluid-schema-version"

/*
 * downgrade_value appends the orders-v1 JSON for the orders-v2 value in to
 * dst; scratch holds decoded strings (any buffer; its contents are
 * replaced). It returns 0, -1 for an invalid value (the reason is in err), or
 * -2 when memory runs out.
 */
int downgrade_value(streamd_buf *dst, streamd_buf *scratch, streamd_bytes in, streamd_buf *err);

/*
 * downgrade_append_string appends s[0:n] (valid UTF-8) as a JSON string with
 * minimal escaping: '"', '\\', \b \f \n \r \t, other bytes below 0x20 as
 * \u00xx (lowercase hex), every other byte raw.
 */
int downgrade_append_string(streamd_buf *dst, const uint8_t *s, size_t n);

#endif

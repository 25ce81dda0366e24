//! orders-downgrade: the streamd transform around [`downgrade::value`].
//! Every `fluid-schema-version` header is replaced by one
//! `fluid-schema-version: 1` appended last; key and timestamp are kept.

pub mod downgrade;

use streamd::{Emitter, Error, Record, Transform};

/// The transform; it keeps its buffers between records.
#[derive(Default)]
pub struct OrdersDowngrade {
    scratch: downgrade::Scratch,
}

impl Transform for OrdersDowngrade {
    fn transform(&mut self, rec: &Record<'_>, out: &mut Emitter<'_>) -> Result<(), Error> {
        let input = rec.value.ok_or("null value")?;
        let o = downgrade::parse(input, &mut self.scratch)?;
        // The v1 value is written straight into the reply.
        let mut w = out.begin_with(rec.timestamp_ms, rec.key, o.max_len(), |v| o.write(v));
        for (name, value) in rec.headers() {
            if name != downgrade::SCHEMA_HEADER {
                w.header(name, value);
            }
        }
        w.header(downgrade::SCHEMA_HEADER, Some(b"1"));
        Ok(())
    }
}

streamd::export_transform!("orders-downgrade", "1.0.0", OrdersDowngrade);

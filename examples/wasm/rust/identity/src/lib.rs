//! identity: a transform that answers every record with a copy of itself.
//!
//! It exercises the whole SDK path (decode the request, re-encode every
//! record) so that benchmarks compare the cost of the languages' SDKs, not
//! of a plugin's logic.

use streamd::{Emitter, Error, Record, Transform};

/// The transform.
#[derive(Default)]
pub struct Identity;

impl Transform for Identity {
    fn transform(&mut self, rec: &Record<'_>, out: &mut Emitter<'_>) -> Result<(), Error> {
        out.emit(rec);
        Ok(())
    }
}

streamd::export_transform!("identity", "1.0.0", Identity);

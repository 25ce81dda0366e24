//! @NAME@: a streamd Wasm codec: ENCODE and DECODE both reverse the bytes
//! of a payload (replace them with your encoding). A null payload (a
//! tombstone) never reaches it: the SDK keeps it null. Build it with
//! build.sh; test it with `streamd plugin test --op encode` (README.md).

use streamd::{Codec, Error, Record};

#[derive(Default)]
pub struct Plugin;

impl Codec for Plugin {
    fn encode(&mut self, rec: &Record<'_>, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend(rec.value.unwrap_or_default().iter().rev());
        Ok(())
    }

    fn decode(&mut self, rec: &Record<'_>, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend(rec.value.unwrap_or_default().iter().rev());
        Ok(())
    }
}

streamd::export_codec!("@NAME@", "0.1.0", Plugin);

//! @NAME@: a streamd Wasm transform that upper-cases the ASCII letters of
//! each record's value (after an optional prefix from its config) and
//! rejects a record with a null value. Build it with build.sh; test it with
//! `streamd plugin test` (README.md).

use streamd::json;
use streamd::{Emitter, Error, Record, Transform};

#[derive(Default)]
pub struct Plugin {
    prefix: Vec<u8>,
    out: Vec<u8>,
}

impl Transform for Plugin {
    /// The config table of the pipeline TOML, as JSON; an error refuses it.
    fn init(&mut self, config: &[u8]) -> Result<(), String> {
        let cfg = json::parse(config).map_err(|e| e.to_string())?;
        cfg.only_keys(&["prefix"])?;
        if let Some(p) = cfg.get("prefix") {
            self.prefix = p.as_str().ok_or("prefix: want a string")?.as_bytes().to_vec();
        }
        Ok(())
    }

    fn transform(&mut self, rec: &Record<'_>, out: &mut Emitter<'_>) -> Result<(), Error> {
        let v = rec.value.ok_or("null value")?; // Err rejects this record (ERR_RECORD)
        self.out.clear();
        self.out.extend_from_slice(&self.prefix);
        self.out.extend(v.iter().map(|c| c.to_ascii_uppercase()));
        out.begin(rec.timestamp_ms, rec.key, Some(&self.out)).headers_from(rec);
        Ok(())
    }
}


streamd::export_transform!("@NAME@", "0.1.0", Plugin);

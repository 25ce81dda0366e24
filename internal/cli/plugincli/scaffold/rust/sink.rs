//! @NAME@: a streamd Wasm sink that "writes" each record by logging it
//! (replace that with the durable write of your destination: a file in a
//! directory granted with dirs, for example) and refuses a record with a
//! null value. Build it with build.sh; test it with `streamd plugin test`
//! (README.md).

use streamd::{Error, Record, Sink};

#[derive(Default)]
pub struct Plugin;

impl Sink for Plugin {
    /// Must make the record durable before it returns Ok: the pipeline
    /// acknowledges what the sink says is written.
    fn write(&mut self, rec: &Record<'_>) -> Result<(), Error> {
        let v = rec.value.ok_or("null value: nothing to write")?; // not written (ERR_RECORD)
        streamd::log(0, &format!("write {}", String::from_utf8_lossy(v)));
        Ok(())
    }
}

streamd::export_sink!("@NAME@", "0.1.0", Plugin);

//! json-to-avro: a Redpanda data transform that converts JSON orders
//! ({"id": 7, "item": "pen"}) to Avro records in the Schema Registry wire
//! format (a zero byte, the schema's id, big-endian, then the Avro datum),
//! keeping each record's key and headers.
//!
//! At start it registers its schema under SUBJECT (an environment
//! variable; default: the output topic's "-value" subject), then reads it
//! back by id and the subject's latest version: the three Schema Registry
//! calls the SDK has. A record whose value is not such an order fails the
//! transform (the SDK then stops it), and so is rejected alone.

use anyhow::{anyhow, Result};
use apache_avro::{to_avro_datum, types::Value, Schema as AvroSchema};
use redpanda_transform_sdk::*;
use redpanda_transform_sdk_sr::*;

const SCHEMA: &str = r#"{"type":"record","name":"Order","namespace":"example","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}"#;

fn main() {
    let subject = std::env::var("SUBJECT").unwrap_or_else(|_| {
        format!("{}-value", std::env::var("REDPANDA_OUTPUT_TOPIC").expect("REDPANDA_OUTPUT_TOPIC"))
    });
    let mut client = SchemaRegistryClient::new();
    let registered = client
        .create_schema(&subject, Schema::new_avro(SCHEMA.to_string(), vec![]))
        .expect("registering the schema");
    let id = registered.id();
    let by_id = client.lookup_schema_by_id(id).expect("looking the schema up by id");
    let latest = client.lookup_latest_schema(&subject).expect("looking the subject's latest version up");
    eprintln!("schema id {} (subject {} version {})", id.0, latest.subject(), latest.version().0);
    let schema = AvroSchema::parse_str(by_id.schema()).expect("parsing the registered schema");
    on_record_written(move |ev, w| to_avro(ev, w, &schema, id));
}

fn to_avro(ev: WriteEvent, w: &mut RecordWriter, schema: &AvroSchema, id: SchemaId) -> Result<()> {
    let v: serde_json::Value = serde_json::from_slice(ev.record.value().unwrap_or_default())?;
    let order = Value::Record(vec![
        ("id".into(), Value::Long(v["id"].as_i64().ok_or_else(|| anyhow!("id is not an integer"))?)),
        ("item".into(), Value::String(v["item"].as_str().ok_or_else(|| anyhow!("item is not a string"))?.into())),
    ]);
    let out = encode_schema_id(id, &to_avro_datum(schema, order)?);
    w.write(BorrowedRecord::new_with_headers(ev.record.key(), Some(&out), ev.record.headers().to_vec()))?;
    Ok(())
}

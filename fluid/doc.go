// Package fluid implements Fluid Messaging for streamd: publishers may start
// writing a new version of a topic's payload at any time, and consumers that
// were built against an older version keep receiving records they understand,
// downgraded by the bridge, until they upgrade.
//
// The pieces:
//
//   - [Metadata]: the versioned schema directory (.fluid/v1, .fluid/v2, ...),
//     each version naming, per topic, the JSON Schema of its payload and (from
//     the second version on) the downgrade plugin that turns records of that
//     version into records of the previous one. [LoadMetadata] reads it,
//     [Metadata.Check] validates it, [Metadata.Compatible] answers whether two
//     versions of a topic carry the same payload.
//   - [Bridge]: the HTTP service (/fluid/downgrade-topic, /fluid/compatible,
//     /fluid/downgrade-offset, DELETE
//     /fluid/topics/{topic}/groups/{group}/schema-version, /fluid/status) and
//     the republisher that fills downgrade topics. Its state lives in a
//     compacted Kafka topic.
//   - [Consumer]: the client side of the protocol for Go applications (and for
//     streamd's own pipeline source): it reads the main topic, asks the bridge
//     about every new version it sees, and switches each partition to the
//     downgrade topic at its first incompatible record.
//
// Every record carries its schema version in the [HeaderSchemaVersion] header
// (decimal). Records without it are taken to be of the baseline version.
// Records the bridge writes to a downgrade topic also carry the partition and
// offset of the main-topic record they came from ([HeaderSourcePartition],
// [HeaderSourceOffset]), the position from which that record is the
// partition's next one ([HeaderSourceFrom]) and the republishing segment that
// wrote it ([HeaderSegment]). That is how consumers find their place, drop
// duplicates and notice a record missing, and how the bridge resumes after a
// crash and fast-forwards an upgraded group, never by offset arithmetic; so a
// consumer group may arrive, leave, upgrade or roll back at any time and
// still receive every record exactly once (docs/fluid.md has the cases).
package fluid

// Package journal is an event journal stored on Kafka, compatible on the
// wire with kafka-journal (github.com/evolution-gaming/kafka-journal).
//
// A journal is named by a Key (topic, id). Writers Append batches of
// events with writer-chosen, increasing sequence numbers (seqNr, 1-based),
// Delete events up to a seqNr, or Purge the whole journal. Each operation
// is one Kafka record (an "action") on the partition of the id, with a
// journal.action JSON header and, for Append, the events as the value.
//
// An Append is accepted only if its first seqNr is above the journal's
// seqNr (and deleteTo), in the partition's order; the replicator and every
// reader apply that rule alike, so a stored event is never overwritten and
// seqNr never goes back. Append returns nil only for an accepted Append,
// and a *ConflictError (ErrConflict) with the journal's seqNr otherwise,
// also when another writer's action got into the partition first.
//
// A Replicator (a pipeline sink) folds those actions into a Store
// (SQLite, PostgreSQL, or a sink plugin), per partition, idempotently, and
// then records how far it got (the partition pointer). Readers combine the
// store with the part of Kafka the replicator has not reached yet: Read,
// Pointer and Delete first produce a Mark action whose offset is a barrier;
// if the store's pointer is at or past the barrier, the store alone
// answers; otherwise the partition is read from pointer+1 up to the Mark,
// folding the journal's unreplicated actions (a Purge there hides the
// store's events, a Delete there hides deleted ones before anything is
// streamed), and events still only in Kafka are streamed after the store's,
// without duplicates at the seam. The answers do not depend on how far
// replication has got.
//
// See docs/journal.md for the wire format, the store schema and the CLI.
package journal

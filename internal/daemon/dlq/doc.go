// Package dlq reads a pipeline's dead-letter topic and replays what is in
// it: `streamd dlq ls|show|replay` and the console's dead-letter page.
//
// A dead letter is the input record a stage or the sink rejected, with
// headers saying why and where it came from (pipeline.DeadLetter):
// streamd-error, streamd-stage, streamd-plugin, streamd-source-topic,
// streamd-source-partition, streamd-source-offset, and streamd-truncated
// when the dead-letter queue's size limit left its value (or also its key
// and headers) out. A Reader scans the topic's partitions from their start
// (or a given offset) to the end they had when the scan began, and hands
// over the entries a Filter selects.
//
// Replay sends the selected entries' original records to a Target: back to
// the source topic (ToTopic), or through the pipeline again (the daemon
// builds that Target from the pipeline's stages and sink). It is
// at-least-once: a batch counts as replayed only once the Target says it
// is durable, and a replay that stops part-way reports, per partition,
// the last dead-letter offset replayed, so that it can be resumed there.
// Replay never deletes or changes anything in the dead-letter topic.
// Dead letters whose value was truncated cannot be replayed; they are
// counted and skipped. A replayed record carries streamd-replay-of (its
// dead letter) and streamd-replay-count (how many times it was replayed);
// ReplayOptions.MaxRecords bounds one replay.
//
// Since the dead letter stays, a replayed record that is rejected again
// need not be dead-lettered again: GuardReplays wraps a pipeline's
// dead-letter sink so that it is not (unless the replay was forced),
// once it has checked that the dead letter named holds the same record;
// otherwise each replay of records that still fail would add as many
// dead letters again.
package dlq

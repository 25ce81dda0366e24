// Package interop holds end-to-end tests of the streamd daemon against an
// independent Kafka client: kcat (librdkafka) produces into a pipeline's
// input topic and consumes its output, with every Kafka batch compression.
// It has no code of its own; see interop_test.go.
package interop

// Package e2e holds end-to-end tests that run the streamd binary against a
// Kafka broker: in-process kfake by default, or the real Apache Kafka named
// by STREAMD_TEST_KAFKA_BROKERS (scripts/test runs the suite both ways).
package e2e

// Package secured holds the tests of streamd against a secured Apache
// Kafka (scripts/kafka-secure: SSL with mutual TLS, SASL_SSL with
// SCRAM-SHA-256/512 and PLAIN, SASL_PLAINTEXT with OAUTHBEARER, ACLs),
// with kcat (librdkafka) and Confluent's Python client as the independent
// clients: every mechanism end to end, a pipeline across two clusters,
// and the errors a user sees when a password, a CA, a host name or an ACL
// is wrong, and how streamd recovers once it is fixed. It has
// no code of its own.
package secured

// Package kafkaconf turns streamd's [kafka] config into franz-go
// clients' settings: a pipeline/kafka.Cluster per cluster ([kafka] and each
// [kafka.clusters.NAME]: brokers, TLS, SASL, rack, the settings of topics
// created there) and the options of a pipeline's source and sink
// (isolation level, fetch sizes, group protocol, acks, linger).
//
// SASL is franz-go's own pkg/sasl (plain, scram, oauth, aws); this
// package only says where each mechanism's credentials come from, at each
// authentication: a password or token as a config.Secret (a file one is
// read again each time), a token file read again when it changes, the
// OAuth 2 client-credentials flow (golang.org/x/oauth2, tokens cached
// until they expire), and AWS credentials from the AWS SDK's default chain.
package kafkaconf

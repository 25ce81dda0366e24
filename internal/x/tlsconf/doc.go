// Package tlsconf builds crypto/tls configurations from PEM files, for
// streamd's Kafka clients and its admin server: CA bundles, certificates
// and keys that are read again when the files change (so a rotated
// certificate is picked up without a restart), and errors that name the
// file and what is wrong with it.
package tlsconf

// Package faultproxy is a TCP proxy for tests that a test can cut and
// slow: it forwards every connection made to its address to one target
// address, and on request refuses new connections and resets open ones
// (a broker or host that is down), swallows the traffic of every
// connection without closing it (a network partition: the sockets stay
// open, nothing arrives), or delays and throttles what it forwards (a slow
// or congested link).
//
// A Kafka client learns broker addresses from metadata, so a proxy only
// sits between a client and a broker if the broker advertises the proxy's
// address: for Apache Kafka, a listener whose advertised address is the
// proxy's (scripts/kafka STREAMD_KAFKA_PROXIED); for kfake, a listener
// whose Addr is the proxy's (see Listener).
//
// The proxy copies no Kafka framing: faults apply to bytes and
// connections, as the network does.
package faultproxy

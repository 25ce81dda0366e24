package kafka_test

import (
	"context"
	"log"

	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/streamd/streamd/internal/x/tlsconf"
	"github.com/streamd/streamd/pipeline/kafka"
)

// A source on a cluster that wants TLS and SCRAM-SHA-512: its Ready
// check says in one line what the cluster refused, if anything.
func ExampleCluster() {
	tc, err := tlsconf.Client(tlsconf.Files{CAFile: "/etc/streamd/kafka-ca.pem"})
	if err != nil {
		log.Fatal(err)
	}
	c := &kafka.Cluster{
		Name:     "prod",
		Seeds:    []string{"kafka-1.internal:9094"},
		TLS:      tc,
		SASL:     scram.Auth{User: "streamd", Pass: "from a secret store"}.AsSha512Mechanism(),
		SASLUser: "streamd",
	}
	src, err := kafka.NewSource(kafka.SourceConfig{Cluster: c, Topics: []string{"orders"}, Group: "orders-v1"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := src.Close(context.Background()); err != nil {
			log.Print(err)
		}
	}()
	if err := src.Ready(context.Background()); err != nil {
		// e.g. kafka cluster "prod" (broker kafka-1.internal:9094): connect:
		// authentication failed: the broker refused user "streamd" (SCRAM-SHA-512): ...
		log.Print(err)
	}
}

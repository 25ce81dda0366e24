package journal_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamd/streamd/journal"
)

// Example appends to a journal, deletes part of it and reads it back,
// with no replicator running: the answers come from Kafka. A Replicator
// (the sink of a pipeline on the journal topic) would move the events to
// the store without changing them.
func Example() {
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders-journal"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	client, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	dir, _ := os.MkdirTemp("", "journal-example")
	defer func() { _ = os.RemoveAll(dir) }()
	store, err := journal.OpenStore(ctx, "sqlite:"+filepath.Join(dir, "journal.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := store.Close(ctx); err != nil {
			log.Print(err)
		}
	}()

	j := journal.New(client, store, journal.WithOrigin("example"))
	defer func() {
		if err := j.Close(ctx); err != nil {
			log.Print(err)
		}
	}()
	key := journal.Key{Topic: "orders-journal", ID: "order-42"}
	if _, err := j.Append(ctx, key, []journal.Event{
		{SeqNr: 1, PayloadType: journal.PayloadJSON, Payload: []byte(`{"created":true}`)},
		{SeqNr: 2, PayloadType: journal.PayloadText, Payload: []byte("paid")},
		{SeqNr: 3, PayloadType: journal.PayloadJSON, Payload: []byte(`{"shipped":true}`), Tags: []string{"shipping"}},
	}); err != nil {
		log.Fatal(err)
	}
	if _, _, err := j.Delete(ctx, key, 1); err != nil {
		log.Fatal(err)
	}
	if _, err := j.Read(ctx, key, 1, func(e journal.Event) error {
		fmt.Printf("%d %s %s %v\n", e.SeqNr, e.PayloadType, e.Payload, e.Tags)
		return nil
	}); err != nil {
		log.Fatal(err)
	}
	seqNr, _, _ := j.Pointer(ctx, key)
	fmt.Println("pointer", seqNr)
	// Output:
	// 2 text paid []
	// 3 json {"shipped":true} [shipping]
	// pointer 3
}

// ExampleNewReplicator shows the replicator as the pipeline engine drives
// it: batches of records from the journal topic, each partition in offset
// order; a nil error per record means it is in the store.
func ExampleNewReplicator() {
	store := journal.NewMemoryStore()
	rep, err := journal.NewReplicator(store)
	if err != nil {
		log.Fatal(err)
	}
	_ = rep // rep.Write(ctx, records) is a plugins.Sink
	fmt.Println(store.Readable())
	// Output: true
}

// ExampleOpenStore opens the built-in SQLite store, creating its schema
// (or migrating an older one, which WithStoreLogger reports).
func ExampleOpenStore() {
	dir, err := os.MkdirTemp("", "journal")
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	st, err := journal.OpenStore(context.Background(), "sqlite:"+filepath.Join(dir, "journal.db"), journal.WithStoreLogger(logger))
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := st.Close(context.Background()); err != nil {
			log.Print(err)
		}
	}()
	fmt.Println("readable:", st.Readable())
	// Output: readable: true
}

package app

import (
	"github.com/streamd/streamd/internal/daemon/config"
	"github.com/streamd/streamd/pipeline"
	"github.com/streamd/streamd/pipeline/kafka"
)

// transactions is the kafka source's transactions of an exactly-once
// pipeline, nil otherwise.
func transactions(pc *config.Pipeline) *kafka.Transactions {
	if pc.Delivery != config.ExactlyOnce {
		return nil
	}
	return &kafka.Transactions{Timeout: pc.Transaction.Timeout.Duration}
}

// transactional is src when it is a transactional kafka source, whose
// transactions the pipeline's kafka sink and DLQ write in; nil otherwise.
func transactional(src pipeline.Source) *kafka.Source {
	if s, ok := src.(*kafka.Source); ok && s.Transactional() {
		return s
	}
	return nil
}

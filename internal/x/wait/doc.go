// Package wait holds the waits streamd's packages share: a sleep that ends
// early with its context, a context that also ends when a stop channel
// closes, a wait for a sync.WaitGroup that ends with its context, and the
// wait of a close bounded by a shutdown deadline (Closed).
package wait

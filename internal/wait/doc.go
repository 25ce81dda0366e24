// Package wait holds the waits streamd's packages share: a sleep that ends
// early with its context, a context that also ends when a stop channel
// closes, and a wait for a sync.WaitGroup that ends with its context.
package wait

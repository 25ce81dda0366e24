// Package wait holds the waits streamd's packages share: a sleep that ends
// early with its context, and a context that also ends when a stop channel
// closes.
package wait

// Package journalcli is `streamd journal append|read|pointer|delete|purge`:
// an event journal of a config's [journal] read and written from the
// command line.
package journalcli

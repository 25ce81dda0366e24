// Package file holds streamd's built-in sources and sinks of local files:
// a JSON-lines file as a source (type = "file") or a sink (type = "file"),
// any writer as a JSON-lines sink (type = "stdout"), and a sink that
// discards every record (type = "drop"). Records are JSON lines as package
// record reads and writes them.
package file

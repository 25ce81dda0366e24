// Package termsafe makes the bytes of records safe to print on a
// terminal. A record's key, value or headers are anyone's who can produce
// to a topic: printed as they are, ESC [2J clears the operator's screen,
// ESC ] 0; sets the window title, ESC ] 52; writes the clipboard, a
// color or a carriage return forges lines, U+202E reverses what follows.
// String shows every such character as a visible escape (\x1b); Writer
// does it for a stream of JSON text, keeping it JSON. The commands that
// print record bytes (streamd dlq, tap, journal read, plugin run to a
// terminal) use them unless told --raw.
package termsafe

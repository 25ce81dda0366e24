// Package jsonscan validates and steps over JSON text without decoding it
// and without allocating: Valid accepts exactly what encoding/json.Valid
// accepts, several times faster (encoding/json steps a scanner state
// machine through a function call per byte); Value, String and Number
// return where a value, string or number starting at an index ends, for
// decoders that pick fields out of a document; Skip and SkipString do the
// same in a document already validated, checking nothing on the way.
package jsonscan

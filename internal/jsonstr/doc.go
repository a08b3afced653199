// Package jsonstr appends JSON string literals without reflection or
// intermediate allocations. The change format's JSON form (package change)
// and the s2s protocol's frames (package wire) both build JSON piecewise
// with it, so a value is escaped the same way wherever it is written.
//
// Escaping follows encoding/json: '"' and '\\' are backslash-escaped,
// control characters become \n, \r, \t or \u00XX, and U+2028 and U+2029
// become \u2028 and \u2029 so the output is safe inside JavaScript too.
package jsonstr

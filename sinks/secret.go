package sinks

import "log/slog"

// Secret is a config value that must never be printed: a password, a key,
// a connection string. Its String, GoString, LogValue and MarshalText
// methods give "***" (or "" when empty), so logs, errors and `ehsink
// validate --print` never show it; Reveal returns the value for a client
// library.
type Secret string

// Reveal returns the secret itself, for handing to a client library.
func (s Secret) Reveal() string { return string(s) }

// String returns *** for a set secret and "" for an empty one.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "***"
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return s.String() }

// LogValue keeps log/slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps encoders (JSON, YAML) from writing the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

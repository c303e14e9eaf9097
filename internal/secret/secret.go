package secret

import "log/slog"

// Redacted is what a secret prints as.
const Redacted = "***"

// String is a secret value. Its String, GoString, LogValue and MarshalText
// methods all give [Redacted] (or "" when empty); use Reveal to get the value.
type String string

// Reveal returns the secret itself, for handing to a client library.
func (s String) Reveal() string { return string(s) }

// String returns *** for a set secret and "" for an empty one.
func (s String) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString keeps %#v from printing the value.
func (s String) GoString() string { return s.String() }

// LogValue keeps log/slog from printing the value.
func (s String) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps encoders (JSON, YAML) from writing the value.
func (s String) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

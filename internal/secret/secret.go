package secret

import "github.com/ehsink/ehsink/sinks"

// Redacted is what a secret prints as.
const Redacted = "***"

// String is a secret value: the sink contract's [sinks.Secret], which
// custom sinks use for their own config fields. Its String, GoString,
// LogValue and MarshalText methods all give [Redacted] (or "" when
// empty); use Reveal to get the value.
type String = sinks.Secret

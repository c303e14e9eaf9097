package cli

import (
	"context"
	"log/slog"
	"regexp"

	azlog "github.com/Azure/azure-sdk-for-go/sdk/azcore/log"
)

// bridgeAzureLogs sends the Azure SDK's log events (a process-global
// listener, not goroutine safe, so set once here before any client exists)
// to logger at debug level, with credentials redacted. It installs nothing
// when debug is off, so that the SDK does not format messages nobody reads.
// restore removes the listener.
func bridgeAzureLogs(logger *slog.Logger) (restore func()) {
	if !logger.Enabled(context.Background(), slog.LevelDebug) {
		return func() {}
	}
	log := logger.With("component", "azure-sdk")
	azlog.SetListener(func(ev azlog.Event, msg string) {
		log.Debug(redact(msg), "event", string(ev))
	})
	return func() { azlog.SetListener(nil) }
}

// redactions find credentials in free text: connection string keys and SAS
// signatures, passwords and tokens in key=value form, the password of a URL
// (postgres://user:PASSWORD@host), and bearer tokens. Each keeps its group 1
// and replaces the rest with ***.
var redactions = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(\b(?:SharedAccessKey|AccountKey|SharedAccessSignature|sig|password|pwd|passwd|client_secret|access_token|refresh_token|token)\s*=\s*)[^;&\s"',]+`),
	regexp.MustCompile(`(?i)(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@/\s]+(@)`),
	regexp.MustCompile(`(?i)(\bBearer\s+)[A-Za-z0-9._~+/=-]+`),
}

// redact removes credentials from s (see redactions).
func redact(s string) string {
	for i, re := range redactions {
		if i == 1 {
			s = re.ReplaceAllString(s, "${1}***${2}")
			continue
		}
		s = re.ReplaceAllString(s, "${1}***")
	}
	return s
}

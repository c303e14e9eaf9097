package emulator

// Behavior: the $cbs node (claims-based security).
//
// The SDK opens a session with a sender link to "$cbs" and a receiver link
// whose target is its reply-to address, sends one put-token request and
// ends the session. Requests are accepted (disposition accepted) and
// answered on the reply link: status-code 202 (int32) for a good token.
// Without Config.Keys every token is good. With keys, a
// "servicebus.windows.net:sastoken" token must name a configured key in
// skn, carry a valid HMAC-SHA256 signature over "sr\nse" and not be
// expired (se "0" never expires); otherwise 401 with an
// InvalidSignature/ExpiredToken description, which the SDK reports as
// unauthorized access. Other operations answer 400 (the SDK tears the
// connection down and retries). Links are not checked against tokens.

import (
	"net/url"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func (s *Server) handleCBS(l *link, req *goamqp.Message) rpcResponse {
	op, _ := req.ApplicationProperties["operation"].(string)
	if op != "put-token" {
		return rpcResponse{status: 400, desc: "unsupported $cbs operation '" + op + "'"}
	}
	token, _ := req.Value.(string)
	if reason := s.checkToken(token, time.Now()); reason != "" {
		return rpcResponse{status: 401, desc: reason}
	}
	return rpcResponse{status: 202, desc: "Accepted"}
}

func urlUnescape(s string) (string, error) { return url.QueryUnescape(s) }

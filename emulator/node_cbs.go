package emulator

// Behavior: the $cbs node (claims-based security).
//
// The SDK opens a session with a sender link to "$cbs" and a receiver link
// for the replies, sends one put-token request and ends the session.
// Requests are accepted (disposition accepted) and answered on the reply
// link (rpc.go says how each SDK names it), with correlation-id = the
// request's message-id: status-code 202 (int32) for a good token.
// Without keys or policies every token is good. With them the token is
// verified and its claim kept for the connection under the request's
// name (auth.go); a bad or expired token answers 401 with an
// InvalidSignature/ExpiredToken description, which the SDK reports as
// unauthorized access. Other operations answer 400 (the SDK tears the
// connection down and retries).

import (
	"time"

	goamqp "github.com/Azure/go-amqp"
)

func (s *Server) handleCBS(l *link, req *goamqp.Message) rpcResponse {
	op, _ := req.ApplicationProperties["operation"].(string)
	if op != "put-token" {
		return rpcResponse{status: 400, desc: "unsupported $cbs operation '" + op + "'"}
	}
	if !s.authEnabled() {
		return rpcResponse{status: 202, desc: "Accepted"}
	}
	token, _ := req.Value.(string)
	cl, reason := s.verifyToken(token, time.Now())
	if reason != "" {
		return rpcResponse{status: 401, desc: reason}
	}
	audience, _ := req.ApplicationProperties["name"].(string)
	if !l.s.c.putClaim(audience, cl) {
		return rpcResponse{status: 403, desc: "QuotaExceeded: too many tokens on one connection."}
	}
	return rpcResponse{status: 202, desc: "Accepted"}
}

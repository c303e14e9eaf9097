package emulator

import (
	"fmt"

	goamqp "github.com/Azure/go-amqp"

	"github.com/ehsink/ehsink/emulator/amqp"
)

// rpcResponse is what a request/response node answers.
type rpcResponse struct {
	status int32
	desc   string
	body   any // amqp-value body; nil for none
}

// rpcHandler adapts a request handler to a sender link: it accepts the
// request delivery, runs the handler and sends the response, settled, on
// the client's receiver link whose target is the request's reply-to, with
// correlation-id = message-id (the SDK drops anything else).
func (s *Server) rpcHandler(handle func(l *link, req *goamqp.Message) rpcResponse) func(*link, *delivery) {
	return func(l *link, d *delivery) {
		c := l.s.c
		var req goamqp.Message
		if d.tooLarge {
			l.settle(d, &amqp.Rejected{Error: &amqp.Error{Condition: amqp.ErrMessageSizeExceeded, Description: "request too large"}})
			return
		}
		if err := req.UnmarshalBinary(d.payload); err != nil {
			l.settle(d, &amqp.Rejected{Error: &amqp.Error{Condition: amqp.ErrDecode, Description: err.Error()}})
			return
		}
		l.settle(d, &amqp.Accepted{})
		s.delay(c.ctx)
		if req.Properties == nil || req.Properties.ReplyTo == nil {
			c.log.Debug("rpc request without reply-to dropped")
			return
		}
		resp := handle(l, &req)
		msg := &goamqp.Message{
			Properties: &goamqp.MessageProperties{CorrelationID: correlationString(req.Properties.MessageID)},
			ApplicationProperties: map[string]any{
				"status-code":        resp.status,
				"status-description": resp.desc,
			},
		}
		if resp.body != nil {
			msg.Value = resp.body
		}
		b, err := msg.MarshalBinary()
		if err != nil {
			c.log.Error("encode rpc response", "err", err)
			return
		}
		c.sendToReplyTo(*req.Properties.ReplyTo, b)
	}
}

// correlationString renders a message-id as the string correlation-id the
// SDK type-asserts.
func correlationString(id any) string {
	switch v := id.(type) {
	case string:
		return v
	case nil:
		return ""
	case goamqp.UUID:
		return v.String()
	}
	return fmt.Sprint(id)
}

// sendToReplyTo sends msg on the server-sender link whose target address
// is replyTo, on any session of this connection.
func (c *conn) sendToReplyTo(replyTo string, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		for _, l := range s.links {
			if l.detached || !l.serverSends() || l.target == nil || l.target.Address != replyTo {
				continue
			}
			if l.credit == 0 {
				c.log.Debug("rpc reply link has no credit yet; sending anyway", "reply_to", replyTo)
				l.credit = 1
			}
			l.sendMessageLocked(msg, uint64(l.deliveryCount))
			return
		}
	}
	c.log.Debug("no reply link for rpc response", "reply_to", replyTo)
}

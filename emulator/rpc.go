package emulator

import (
	goamqp "github.com/Azure/go-amqp"

	"github.com/ehsink/ehsink/emulator/internal/amqp"
)

// rpcResponse is what a request/response node answers.
type rpcResponse struct {
	status int32
	desc   string
	body   any // amqp-value body; nil for none
}

// rpcHandler adapts a request handler to a sender link: it accepts the
// request delivery, runs the handler and sends the response, settled, on
// the client's reply link (see replyLinkLocked), with correlation-id =
// message-id, of the same AMQP type (clients compare them as values).
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
		var replyTo string
		var messageID any
		if req.Properties != nil {
			messageID = req.Properties.MessageID
			if req.Properties.ReplyTo != nil {
				replyTo = *req.Properties.ReplyTo
			}
		}
		resp := handle(l, &req)
		msg := &goamqp.Message{
			Properties: &goamqp.MessageProperties{CorrelationID: messageID},
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
		c.sendReply(l, replyTo, b)
	}
}

// sendReply sends an RPC response on the reply link for a request that
// arrived on req with the given reply-to.
func (c *conn) sendReply(req *link, replyTo string, msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.replyLinkLocked(req, replyTo)
	if l == nil {
		c.log.Debug("no reply link for rpc response", "reply_to", replyTo, "node", req.target.Address)
		return
	}
	if l.credit == 0 {
		c.log.Debug("rpc reply link has no credit yet; sending anyway", "reply_to", replyTo)
		l.credit = 1
	}
	l.sendMessageLocked(msg, uint64(l.deliveryCount))
}

// replyLinkLocked finds the server-sender link a response goes to. Each
// SDK names it differently:
//   - go-amqp (Go SDK): reply-to is the receiver link's target address;
//   - rhea (JavaScript SDK): reply-to is the receiver link's name, and the
//     link has no target address;
//   - pyamqp (Python SDK): no reply-to; the answer goes to the receiver
//     link on the request's session whose source is the same node.
func (c *conn) replyLinkLocked(req *link, replyTo string) *link {
	usable := func(l *link) bool { return !l.detached && l.serverSends() }
	if replyTo == "" {
		for _, l := range req.s.links {
			if usable(l) && l.source != nil && l.source.Address == req.target.Address {
				return l
			}
		}
		return nil
	}
	var byName *link
	for _, s := range c.sessions {
		for _, l := range s.links {
			if !usable(l) {
				continue
			}
			if l.target != nil && l.target.Address == replyTo {
				return l
			}
			if byName == nil && l.name == replyTo {
				byName = l
			}
		}
	}
	return byName
}

package emulator

// Behavior: event hub sender links ("hub" and "hub/Partitions/N").
//
// Attach: unknown hub → amqp:not-found; unknown partition →
// com.microsoft:argument-out-of-range (both as a rejected attach). The
// reply advertises max-message-size (Config.MaxMessageSize, 1 MiB by
// default) and the server grants 1000 credit, topped up at half.
//
// Transfers: message-format 0x80013700 is an SDK batch whose data sections
// each hold one encoded event; format 0 (or any other) is one plain event.
// Events are stored verbatim and in order, all in one partition. The
// partition key is the envelope's x-opt-partition-key message annotation;
// with a key and no partition in the address the hub hashes the key,
// without either it picks round-robin. The delivery is accepted only
// after the events are stored (so they are visible to receivers and
// partition properties when the SDK's Send returns). A message over
// max-message-size is rejected with amqp:link:message-size-exceeded; hub
// errors are rejected with their condition (com.microsoft:server-busy
// during ServerBusy).

import (
	"errors"

	"github.com/ehsink/ehsink/emulator/internal/amqp"
	"github.com/ehsink/ehsink/emulator/internal/hub"
)

func (s *Server) attachHubSender(l *link, addr string) *amqp.Error {
	ent, err := parseEntity(addr)
	if err != nil || ent.consumerGroup != "" {
		return &amqp.Error{Condition: amqp.ErrNotFound, Description: "no event hub or partition at '" + addr + "'"}
	}
	h, err := s.ns.Hub(ent.hub)
	if err != nil {
		return toAMQPError(err)
	}
	if ent.partition != "" {
		if _, err := h.PartitionProperties(ent.partition); err != nil {
			return toAMQPError(err)
		}
	}
	l.onMessage = func(l *link, d *delivery) { s.storeDelivery(l, h, ent.partition, d) }
	return nil
}

func (s *Server) storeDelivery(l *link, h *hub.Hub, partition string, d *delivery) {
	c := l.s.c
	if d.tooLarge {
		l.settle(d, &amqp.Rejected{Error: &amqp.Error{Condition: amqp.ErrMessageSizeExceeded,
			Description: "The received message exceeds the maximum message size of the link."}})
		return
	}
	msgs := [][]byte{d.payload}
	if d.format == amqp.BatchMessageFormat {
		var err error
		if msgs, err = amqp.BatchPayloads(d.payload); err != nil {
			l.settle(d, &amqp.Rejected{Error: &amqp.Error{Condition: amqp.ErrDecode, Description: err.Error()}})
			return
		}
	}
	if len(msgs) == 0 {
		l.settle(d, &amqp.Accepted{})
		return
	}
	key, err := partitionKey(d.payload)
	if err != nil {
		l.settle(d, &amqp.Rejected{Error: &amqp.Error{Condition: amqp.ErrDecode, Description: err.Error()}})
		return
	}
	s.delay(c.ctx)
	if _, err := h.Append(partition, key, msgs); err != nil {
		if errors.Is(err, hub.ErrClosed) {
			return // shutting down; the connection closes next
		}
		c.log.Debug("send rejected", "hub", h.Name(), "err", err)
		l.settle(d, &amqp.Rejected{Error: toAMQPError(err)})
		return
	}
	l.settle(d, &amqp.Accepted{})
}

// partitionKey reads x-opt-partition-key from a message's annotations.
func partitionKey(msg []byte) (*string, error) {
	secs, err := amqp.Sections(msg)
	if err != nil {
		return nil, err
	}
	for _, sec := range secs {
		if sec.Code != amqp.DescMessageAnnotations {
			continue
		}
		v, _, err := amqp.Decode(sec.Value)
		if err != nil {
			return nil, err
		}
		m, _ := v.(amqp.Map)
		if k, ok := m.Get(amqp.Symbol("x-opt-partition-key")); ok {
			if ks, ok := k.(string); ok {
				return &ks, nil
			}
		}
	}
	return nil, nil
}

package emulator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ehsink/ehsink/emulator/internal/amqp"
	"github.com/ehsink/ehsink/emulator/internal/hub"
)

const (
	cbsNode        = "$cbs"
	managementNode = "$management"
)

// resolveNode binds a new link to its node by address and role, setting
// the link's behaviour. It returns the AMQP error to reject the attach
// with. It runs on the read goroutine without conn.mu.
func (s *Server) resolveNode(l *link, a *amqp.Attach) *amqp.Error {
	if l.serverSends() {
		if a.Source == nil {
			return &amqp.Error{Condition: amqp.ErrInvalidField, Description: "a receiver link needs a source"}
		}
		switch addr := a.Source.Address; addr {
		case cbsNode, managementNode:
			return nil // an RPC reply link: responses are routed to it (rpc.go)
		default:
			if e := s.authorizeLink(l, addr, RightListen); e != nil {
				return e
			}
			return s.attachPartitionReceiver(l, a)
		}
	}
	if a.Target == nil {
		return &amqp.Error{Condition: amqp.ErrInvalidField, Description: "a sender link needs a target"}
	}
	switch addr := a.Target.Address; addr {
	case cbsNode:
		l.onMessage = s.rpcHandler(s.handleCBS)
	case managementNode:
		l.onMessage = s.rpcHandler(s.handleManagement)
	default:
		if e := s.authorizeLink(l, addr, RightSend); e != nil {
			return e
		}
		return s.attachHubSender(l, addr)
	}
	return nil
}

// parseEntity splits "hub", "hub/Partitions/N" and
// "hub/ConsumerGroups/cg/Partitions/N". Hub names are case-insensitive
// on the real service; the emulator matches them exactly.
type entity struct {
	hub, consumerGroup, partition string
}

func parseEntity(addr string) (entity, error) {
	// Clients may send a full amqp://host/ URL as the address.
	if i := strings.Index(addr, "://"); i >= 0 {
		rest := addr[i+3:]
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			addr = rest[j+1:]
		}
	}
	parts := strings.Split(strings.Trim(addr, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return entity{hub: parts[0]}, nil
	case len(parts) == 3 && strings.EqualFold(parts[1], "Partitions"):
		return entity{hub: parts[0], partition: parts[2]}, nil
	case len(parts) == 5 && strings.EqualFold(parts[1], "ConsumerGroups") && strings.EqualFold(parts[3], "Partitions"):
		return entity{hub: parts[0], consumerGroup: parts[2], partition: parts[4]}, nil
	}
	return entity{}, fmt.Errorf("address %q is not an event hub, partition or consumer group partition", addr)
}

// toAMQPError maps hub errors to AMQP errors; anything else is internal.
func toAMQPError(err error) *amqp.Error {
	var he *hub.Error
	if errors.As(err, &he) {
		return &amqp.Error{Condition: amqp.Symbol(he.Condition), Description: he.Description}
	}
	return &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
}

func forcedError(desc string) *amqp.Error {
	return &amqp.Error{Condition: amqp.ErrConnectionForced, Description: desc}
}

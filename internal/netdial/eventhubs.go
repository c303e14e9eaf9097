package netdial

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/connstr"
)

// Event Hubs over AMQP.
//
// The azeventhubs v2 SDK has no dialer option for AMQP over TCP, but it
// hands whatever its NewWebSocketConn option returns to go-amqp's NewConn
// as the raw transport (azeventhubs internal/namespace.go newClientImpl):
// the SDK names the option after web sockets, yet nothing in it speaks
// web sockets. go-amqp v1.5.0 NewConn neither dials nor starts TLS on a
// given connection (TLS negotiation inside AMQP is never enabled; its
// TLSConfig is only used by Dial); it runs SASL ANONYMOUS and the AMQP open
// (hostname = the namespace) on it, as it does on a connection it dialed.
// So returning a TCP (or TLS over TCP) connection dialed by [Dialer] gives
// the same AMQP connection with our socket options.
//
// What the SDK dials itself (namespace.go getAMQPHostURI, go-amqp
// dialConn), and so what [EventHubs] dials:
//
//   - the namespace as the SDK holds it: the host[:port] of the connection
//     string's Endpoint, or the namespace given with a credential;
//   - amqp:// (plain TCP, port 5672 by default) when the connection string
//     says UseDevelopmentEmulator=true, else amqps:// (TLS, port 5671 by
//     default);
//   - TLS with the client's TLS config (a copy of it, or an empty one),
//     whose ServerName, when empty and InsecureSkipVerify is off, becomes
//     the namespace. One deliberate difference: the SDK puts the namespace
//     there with its port when it has one ("127.0.0.1:5671"), which no
//     certificate matches; here it is the host alone. For a namespace
//     without a port (every real one) the two are the same.
//
// The SDK's CustomEndpoint option (source.custom_endpoint: a TCP proxy,
// a private endpoint) is ignored by the SDK whenever NewWebSocketConn is
// set; in its own dial it takes the namespace's place in the URL (so in
// the address and the TLS name, while the AMQP open and the token
// audiences keep the namespace). [SetConsumerDial] and [SetProducerDial]
// do the same: they dial the custom endpoint. Clients with a web socket
// dialer of their own are left alone.

// EventHubsEndpoint is where the SDK connects for a namespace.
type EventHubsEndpoint struct {
	// Namespace is the fully qualified namespace as the SDK holds it
	// (host, or host:port for an emulator).
	Namespace string
	// Plain is true for the SDK's emulator mode (UseDevelopmentEmulator=true
	// in the connection string): AMQP over TCP without TLS.
	Plain bool
}

// EventHubsConnectionString returns the endpoint a connection string
// names, parsed by the parser the SDK runs.
func EventHubsConnectionString(conn string) (EventHubsEndpoint, error) {
	props, err := connstr.EventHubs(conn)
	if err != nil {
		return EventHubsEndpoint{}, err
	}
	return EventHubsEndpoint{Namespace: props.FullyQualifiedNamespace, Plain: props.Emulator}, nil
}

// Addr returns the host:port the SDK would dial: go-amqp's default ports
// for the amqp:// or amqps:// URL the SDK builds.
func (e EventHubsEndpoint) Addr() (string, error) {
	scheme, port := "amqps", "5671"
	if e.Plain {
		scheme, port = "amqp", "5672"
	}
	u, err := url.Parse(scheme + "://" + e.Namespace + "/")
	if err != nil {
		return "", fmt.Errorf("netdial: event hubs namespace %q: %w", e.Namespace, err)
	}
	if p := u.Port(); p != "" {
		port = p
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// EventHubsDial is the type of the SDK's NewWebSocketConn options.
type EventHubsDial = func(ctx context.Context, params azeventhubs.WebSocketConnParams) (net.Conn, error)

// EventHubs returns a NewWebSocketConn hook for the SDK's clients that
// dials e with [Dialer]: plain TCP for the emulator mode, TLS with
// tlsConfig (the client's TLSConfig option; nil for none) otherwise. The
// connection is handed to go-amqp as is; nothing wraps its reads or writes.
func EventHubs(e EventHubsEndpoint, tlsConfig *tls.Config) EventHubsDial {
	return func(ctx context.Context, _ azeventhubs.WebSocketConnParams) (net.Conn, error) {
		addr, err := e.Addr()
		if err != nil {
			return nil, err
		}
		if e.Plain {
			return Dialer().DialContext(ctx, "tcp", addr)
		}
		var cfg *tls.Config
		if tlsConfig != nil {
			cfg = tlsConfig.Clone()
		} else {
			cfg = new(tls.Config)
		}
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		d := &tls.Dialer{NetDialer: Dialer(), Config: cfg}
		return d.DialContext(ctx, "tcp", addr)
	}
}

// SetConsumerDial makes a consumer client's AMQP connections dialed by
// [EventHubs] for e (or for the client's custom endpoint), with the
// client's TLS config. Options with a web socket dialer of their own are
// left to the SDK.
func SetConsumerDial(o *azeventhubs.ConsumerClientOptions, e EventHubsEndpoint) {
	if o.NewWebSocketConn != nil {
		return
	}
	if o.CustomEndpoint != "" {
		e.Namespace = o.CustomEndpoint
	}
	o.NewWebSocketConn = EventHubs(e, o.TLSConfig)
}

// SetProducerDial is [SetConsumerDial] for a producer client.
func SetProducerDial(o *azeventhubs.ProducerClientOptions, e EventHubsEndpoint) {
	if o.NewWebSocketConn != nil {
		return
	}
	if o.CustomEndpoint != "" {
		e.Namespace = o.CustomEndpoint
	}
	o.NewWebSocketConn = EventHubs(e, o.TLSConfig)
}

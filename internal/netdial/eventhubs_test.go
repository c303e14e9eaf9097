package netdial

import (
	"testing"
)

// TestEventHubsAddr: the address dialed is the one the SDK's own dial
// takes (its amqp:// or amqps:// URL with go-amqp's default ports).
func TestEventHubsAddr(t *testing.T) {
	for _, c := range []struct {
		conn string
		want string
	}{
		{"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v", "ns.servicebus.windows.net:5671"},
		{"Endpoint=sb://ns.servicebus.windows.net:443/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=h", "ns.servicebus.windows.net:443"},
		{"Endpoint=sb://127.0.0.1:40123;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true", "127.0.0.1:40123"},
		{"Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true", "localhost:5672"},
		{"Endpoint=sb://[::1]:6000;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true", "[::1]:6000"},
		{"Endpoint=sb://[::1];SharedAccessKeyName=k;SharedAccessKey=v", "[::1]:5671"},
	} {
		e, err := EventHubsConnectionString(c.conn)
		if err != nil {
			t.Fatalf("%s: %v", c.conn, err)
		}
		got, err := e.Addr()
		if err != nil {
			t.Fatalf("%s: %v", c.conn, err)
		}
		if got != c.want {
			t.Errorf("%s: dials %s, want %s", c.conn, got, c.want)
		}
	}
	// A namespace given with a credential is dialed over TLS.
	if got, _ := (EventHubsEndpoint{Namespace: "ns.servicebus.windows.net"}).Addr(); got != "ns.servicebus.windows.net:5671" {
		t.Errorf("namespace with a credential: dials %s", got)
	}
	if _, err := EventHubsConnectionString("Endpoint=sb://x"); err == nil {
		t.Error("a connection string without a key parsed")
	}
}

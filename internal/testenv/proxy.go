package testenv

import (
	"net/url"
	"testing"

	"github.com/ehsink/ehsink/internal/faultproxy"
)

// Proxy starts a fault proxy in front of target (host:port), closed when
// the test ends.
func Proxy(t testing.TB, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(target)
	if err != nil {
		t.Fatalf("fault proxy in front of %s: %v", target, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// ProxyDSN puts a fault proxy in front of the server of a PostgreSQL URL
// DSN; it returns the DSN through the proxy, and the proxy.
func ProxyDSN(t testing.TB, dsn string) (string, *faultproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("DSN: %v", err)
	}
	p := Proxy(t, u.Host)
	u.Host = p.Addr()
	return u.String(), p
}

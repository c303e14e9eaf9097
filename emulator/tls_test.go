package emulator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/secret"
)

// trusting returns a client TLS config whose only root is the emulator's
// certificate. The SDK verifies the connection string's host *with* its
// port ("127.0.0.1:5671") unless ServerName is set, so it is.
func trusting(t *testing.T, certPEM []byte) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(certPEM) {
		t.Fatalf("certificate PEM does not parse: %q", certPEM)
	}
	return &tls.Config{RootCAs: pool, ServerName: "localhost"}
}

// roundTripTLS sends two events over AMQPS with the real SDK (no emulator
// mode, amqps:// like against Azure) and reads them back.
func roundTripTLS(t *testing.T, connStr string, tlsCfg *tls.Config) {
	t.Helper()
	ctx := testCtx(t)
	p, err := azeventhubs.NewProducerClientFromConnectionString(connStr, "", &azeventhubs.ProducerClientOptions{TLSConfig: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	props, err := p.GetEventHubProperties(ctx, nil)
	if err != nil {
		t.Fatalf("GetEventHubProperties over TLS: %v", err)
	}
	if props.Name != "orders" || len(props.PartitionIDs) != 4 {
		t.Fatalf("hub properties over TLS: %+v", props)
	}
	sendEvents(t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("2")}, "a", "b")
	c, err := azeventhubs.NewConsumerClientFromConnectionString(connStr, "", azeventhubs.DefaultConsumerGroup, &azeventhubs.ConsumerClientOptions{TLSConfig: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	pc, err := c.NewPartitionClient("2", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	evs := receiveN(t, pc, 2)
	if string(evs[0].Body) != "a" || string(evs[1].Body) != "b" {
		t.Fatalf("received %q, %q; want a, b", evs[0].Body, evs[1].Body)
	}
}

// TestSDKOverTLS: with Config.TLS the Go SDK, dialling amqps:// as it
// does against Azure, trusts the generated certificate (from CertOut),
// and keys are verified over TLS too. A client that does not trust the
// certificate is refused by its own TLS check.
func TestSDKOverTLS(t *testing.T) {
	certOut := filepath.Join(t.TempDir(), "certs", "emulator.pem")
	srv := startEmulator(t, Config{
		Keys: map[string]secret.String{"all": "c2VjcmV0"},
		TLS:  &TLSOptions{CertOut: certOut},
	})
	written, err := os.ReadFile(certOut)
	if err != nil {
		t.Fatalf("CertOut not written: %v", err)
	}
	if string(written) != string(srv.CertificatePEM()) {
		t.Fatal("CertOut differs from CertificatePEM")
	}
	cs := srv.TLSConnectionString("orders")
	if strings.Contains(cs, "UseDevelopmentEmulator") || !strings.Contains(cs, srv.TLSAddr()) {
		t.Fatalf("TLSConnectionString = %q", cs)
	}
	roundTripTLS(t, cs, trusting(t, written))
	// The plain listener still serves the SDK's emulator mode.
	sendEvents(t, newProducer(t, srv, "orders"), nil, "plain")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	untrusting, err := azeventhubs.NewProducerClientFromConnectionString(cs, "", &azeventhubs.ProducerClientOptions{
		TLSConfig:    &tls.Config{RootCAs: x509.NewCertPool()},
		RetryOptions: azeventhubs.RetryOptions{MaxRetries: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusting.Close(context.Background())
	var unknown x509.UnknownAuthorityError
	if _, err := untrusting.GetEventHubProperties(ctx, nil); !errors.As(err, &unknown) && !strings.Contains(fmtErr(err), "certificate") {
		t.Fatalf("a client not trusting the certificate got %v, want a certificate error", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestTLSCertFiles: TLSOptions.CertFile/KeyFile serve a given certificate
// and CertOut then holds its last (issuing) certificate.
func TestTLSCertFiles(t *testing.T) {
	dir := t.TempDir()
	cert, caPEM, err := generateCertificate(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var chain []byte
	for _, der := range cert.Certificate {
		chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, out := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "trust.pem")
	writeFile(t, certFile, chain)
	writeFile(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	srv := startEmulator(t, Config{TLS: &TLSOptions{CertFile: certFile, KeyFile: keyFile, CertOut: out}})
	if string(srv.CertificatePEM()) != string(caPEM) {
		t.Fatal("CertificatePEM is not the chain's issuing certificate")
	}
	roundTripTLS(t, srv.TLSConnectionString("orders"), trusting(t, caPEM))

	if _, err := Start(context.Background(), Config{TLS: &TLSOptions{CertFile: certFile}}); err == nil {
		t.Fatal("Start with a cert file and no key file succeeded")
	}
	if _, err := Start(context.Background(), Config{TLS: &TLSOptions{CertFile: keyFile, KeyFile: keyFile}}); err == nil {
		t.Fatal("Start with a key as certificate succeeded")
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeListener: New plus Serve on the caller's own listeners, a
// plain one and a TLS one, serves the SDK; Shutdown makes Serve return nil
// and closes the listeners, and Serve after Shutdown refuses.
func TestServeListener(t *testing.T) {
	srv, err := New(Config{Hubs: []HubConfig{{Name: "orders", Partitions: 4}}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != "" {
		t.Fatalf("Addr before Serve = %q", srv.Addr())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cert, caPEM, err := generateCertificate(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tlsLn := tls.NewListener(tcpLn, &tls.Config{Certificates: []tls.Certificate{cert}})
	served := make(chan error, 2)
	go func() { served <- srv.Serve(ln) }()
	go func() { served <- srv.Serve(tlsLn) }()

	cs := "Endpoint=sb://" + ln.Addr().String() + ";SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders;UseDevelopmentEmulator=true"
	p, err := azeventhubs.NewProducerClientFromConnectionString(cs, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sendEvents(t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, "x")
	p.Close(context.Background())
	roundTripTLS(t, "Endpoint=sb://"+tcpLn.Addr().String()+"/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders", trusting(t, caPEM))

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for range 2 {
		if err := <-served; err != nil {
			t.Fatalf("Serve after Shutdown returned %v, want nil", err)
		}
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("the listener still accepts after Shutdown")
	}
	again, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(again); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Shutdown = %v, want ErrServerClosed", err)
	}
	if _, err := net.Dial("tcp", again.Addr().String()); err == nil {
		t.Fatal("Serve after Shutdown left its listener open")
	}
}

package emulator

// Behavior: the AMQPS listener.
//
// SDKs without an emulator mode (azure-eventhub for Python before 5.12,
// older .NET and Java clients) always dial amqps:// and check the server
// certificate; Python 5.11 even ignores the endpoint's port and always
// dials 5671 (listen on another loopback address, 127.0.0.2:5671, to run
// several emulators). With Config.TLS the emulator also listens for
// TLS on TLSOptions.Addr and speaks the same AMQP there as on the plain
// listener (SASL, CBS and every node unchanged). Without a certificate
// file it generates, at each start, a private certificate authority and a
// server certificate it signed for 127.0.0.1, ::1 and localhost; clients
// trust the authority (Server.CertificatePEM, or the file written to
// TLSOptions.CertOut). Token audiences then start with amqps://; they are
// matched by path, so the scheme and host do not matter.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// defaultTLSAddr is the default AMQPS listen address: loopback, any free
// port. The service's own port is 5671.
const defaultTLSAddr = "127.0.0.1:0"

// generatedCertLifetime is how long a generated certificate is valid; it
// is regenerated at every start.
const generatedCertLifetime = 365 * 24 * time.Hour

// TLSOptions configures the optional AMQPS listener.
type TLSOptions struct {
	// Addr is the AMQPS listen address. If empty, DefaultTLSAddr.
	Addr string
	// CertFile and KeyFile name a PEM certificate chain and its private
	// key. If both are empty, the emulator generates a certificate
	// authority and a server certificate for 127.0.0.1, ::1 and
	// localhost at start.
	CertFile, KeyFile string
	// CertOut, if set, is the file the certificate clients should trust is
	// written to as PEM (the generated authority, or CertFile's last
	// certificate), with parent directories created. If empty, nothing is
	// written; Server.CertificatePEM returns the same bytes.
	CertOut string
}

func (o *TLSOptions) withDefaults() {
	if o.Addr == "" {
		o.Addr = defaultTLSAddr
	}
}

func (o *TLSOptions) validate() error {
	if (o.CertFile == "") != (o.KeyFile == "") {
		return fmt.Errorf("tls: cert_file and key_file go together (cert_file %q, key_file %q)", o.CertFile, o.KeyFile)
	}
	return nil
}

// serverTLS builds the server's tls.Config and the PEM of the certificate
// a client should trust. A generated certificate also names the IP
// addresses of extraAddrs (the schema registry's listen address).
func (o *TLSOptions) serverTLS(now time.Time, extraAddrs ...string) (*tls.Config, []byte, error) {
	var (
		cert     tls.Certificate
		trustPEM []byte
		err      error
	)
	if o.CertFile != "" {
		cert, err = tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("tls: load %s and %s: %w", o.CertFile, o.KeyFile, err)
		}
		last := cert.Certificate[len(cert.Certificate)-1]
		trustPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: last})
	} else {
		var extra []net.IP
		for _, addr := range append([]string{o.Addr}, extraAddrs...) {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() {
					extra = append(extra, ip)
				}
			}
		}
		cert, trustPEM, err = generateCertificate(now, extra...)
		if err != nil {
			return nil, nil, fmt.Errorf("tls: generate a certificate: %w", err)
		}
	}
	if o.CertOut != "" {
		if err := writeCertOut(o.CertOut, trustPEM); err != nil {
			return nil, nil, err
		}
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, trustPEM, nil
}

func writeCertOut(path string, pemBytes []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("tls: cert_out: %w", err)
	}
	// Write then rename, so a client never reads half a certificate.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pemBytes, 0o644); err != nil {
		return fmt.Errorf("tls: cert_out: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("tls: cert_out: %w", err)
	}
	return nil
}

// generateCertificate makes a throwaway certificate authority and a
// server certificate it signs for the loopback names and extraIPs (the
// listen address, which may be another loopback address such as
// 127.0.0.2). Clients trust the authority: a separate authority keeps
// strict verifiers (which refuse a CA certificate as a server
// certificate) happy.
func generateCertificate(now time.Time, extraIPs ...net.IP) (tls.Certificate, []byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	notBefore, notAfter := now.Add(-time.Hour), now.Add(generatedCertLifetime)
	caTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{Organization: []string{"ehsink"}, CommonName: "ehsink emulator local CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{Organization: []string{"ehsink"}, CommonName: "localhost"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              []string{"localhost"},
		IPAddresses:           append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, extraIPs...),
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: key}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms (Go 1.24+).
		panic(err)
	}
	return n
}

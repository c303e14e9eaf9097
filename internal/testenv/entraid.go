package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// NewAzuriteOAuth starts an Azurite instance for t alone that serves
// HTTPS and, as Blob Storage does for Entra ID, takes bearer tokens
// (Azurite's --oauth basic: it checks their audience, issuer and expiry,
// not their signature); the shared key works too. Its certificate is
// self-signed: a client trusts [AzuriteInstance.CertFile] (SSL_CERT_FILE
// for a child process, [AzuriteInstance.HTTPClient] in the test). The
// instance is stopped when t ends.
func NewAzuriteOAuth(t testing.TB) *AzuriteInstance {
	t.Helper()
	inst := &AzuriteInstance{bin: azuriteBinary(t), tlsDir: t.TempDir()}
	if err := writeSelfSigned(inst.tlsDir); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := inst.Start(); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(inst.Stop)
	return inst
}

// CertFile is the PEM certificate an HTTPS instance serves ("" for an
// http one).
func (a *AzuriteInstance) CertFile() string {
	if a.tlsDir == "" {
		return ""
	}
	return filepath.Join(a.tlsDir, "cert.pem")
}

// HTTPClient is an HTTP client that trusts the instance's certificate.
func (a *AzuriteInstance) HTTPClient(t testing.TB) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if a.tlsDir != "" {
		b, err := os.ReadFile(a.CertFile())
		if err != nil {
			t.Fatal(err)
		}
		pool.AppendCertsFromPEM(b)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// writeSelfSigned writes cert.pem and key.pem for 127.0.0.1 and localhost
// into dir.
func writeSelfSigned(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true,

		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600)
}

// ManagedIdentity serves Entra ID tokens as App Service's managed
// identity endpoint does, and returns the environment that points
// azidentity's DefaultAzureCredential at it (IDENTITY_ENDPOINT and
// IDENTITY_HEADER), with the count of tokens it issued for a resource
// (https://storage.azure.com, https://eventhubs.azure.net). A token names
// the resource asked for as its audience; it is not signed, which
// [NewAzuriteOAuth] does not check. The server stops when t ends.
func ManagedIdentity(t testing.TB) (env []string, issued func(resource string) int) {
	t.Helper()
	var (
		mu     sync.Mutex
		counts = map[string]int{}
	)
	const header = "testenv-identity-header"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resource := r.URL.Query().Get("resource")
		if r.Header.Get("X-IDENTITY-HEADER") != header || resource == "" {
			http.Error(w, "want X-IDENTITY-HEADER and resource", http.StatusBadRequest)
			return
		}
		mu.Lock()
		counts[trimSlash(resource)]++
		mu.Unlock()
		exp := time.Now().Add(time.Hour)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"access_token": unsignedJWT(resource, exp), "expires_on": strconv.FormatInt(exp.Unix(), 10),
			"resource": resource, "token_type": "Bearer",
		})
	}))
	t.Cleanup(srv.Close)
	return []string{"IDENTITY_ENDPOINT=" + srv.URL + "/msi/token", "IDENTITY_HEADER=" + header}, func(resource string) int {
		mu.Lock()
		defer mu.Unlock()
		return counts[trimSlash(resource)]
	}
}

// Credential is an Entra ID credential whose tokens are for audience
// (https://storage.azure.com for Blob Storage), unsigned, as
// [ManagedIdentity] issues them: for a client given its credential in
// the test process.
func Credential(audience string) azcore.TokenCredential { return audienceCredential(audience) }

type audienceCredential string

func (a audienceCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	exp := time.Now().Add(time.Hour)
	return azcore.AccessToken{Token: unsignedJWT(string(a), exp), ExpiresOn: exp}, nil
}

// unsignedJWT is a token for audience, issued by a fixed tenant.
func unsignedJWT(audience string, exp time.Time) string {
	const tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	part := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now().Add(-time.Minute).Unix()
	return part(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." + part(map[string]any{
		"aud": trimSlash(audience), "iss": fmt.Sprintf("https://sts.windows.net/%s/", tenant), "tid": tenant,
		"oid": "00000000-0000-0000-0000-0000000e6510", "iat": now, "nbf": now, "exp": exp.Unix(),
	}) + "." + base64.RawURLEncoding.EncodeToString([]byte("unsigned"))
}

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

package connstr

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/jackc/pgx/v5"
)

// secretMark is in every key of the strings below: no error may show it.
const secretMark = "S3CRET"

// TestRefusesWhatTheSDKLetsThrough: each string is malformed, the SDK's
// own parser takes it (so a connector built from it started and then
// retried a refused request forever, while validate said ok), and the
// package's parser refuses it, naming the key and never quoting the value.
func TestRefusesWhatTheSDKLetsThrough(t *testing.T) {
	storage := []struct{ name, s, want string }{
		{"empty AccountKey", "AccountName=devstoreaccount1;AccountKey=", "AccountKey is empty"},
		{"empty AccountName", "AccountName=;AccountKey=" + secretMark + "00;BlobEndpoint=http://127.0.0.1:10000/a", "AccountName is empty"},
		{"empty SharedAccessSignature", "BlobEndpoint=https://a.blob.core.windows.net;SharedAccessSignature=", "SharedAccessSignature is empty"},
		{"BlobEndpoint not a URL", "AccountName=a;AccountKey=" + secretMark + "00;BlobEndpoint=127.0.0.1:10000", "BlobEndpoint must be an http(s) URL"},
		{"unknown protocol", "DefaultEndpointsProtocol=htps;AccountName=a;AccountKey=" + secretMark + "00", "DefaultEndpointsProtocol"},
		{"AccountKey without AccountName, with a SAS", "BlobEndpoint=https://a.blob.core.windows.net;AccountKey=" + secretMark + "00;SharedAccessSignature=sv=1", "AccountKey needs AccountName"},
	}
	for _, c := range storage {
		t.Run("storage/"+c.name, func(t *testing.T) {
			if _, err := container.NewClientFromConnectionString(c.s, "c", nil); err != nil {
				t.Fatalf("the SDK refuses it too (%v): not a case of this test", err)
			}
			_, err := ContainerClient(c.s, "c", nil)
			checkRefused(t, err, c.want)
			checkRefused(t, Storage(c.s), c.want)
		})
	}
	eventHubs := []struct{ name, s, want string }{
		{"empty SharedAccessKey", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=", "SharedAccessKey is empty"},
		{"empty SharedAccessKeyName", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=;SharedAccessKey=" + secretMark, "SharedAccessKeyName is empty"},
		{"empty EntityPath", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=" + secretMark + ";EntityPath=", "EntityPath is empty"},
	}
	for _, c := range eventHubs {
		t.Run("eventhubs/"+c.name, func(t *testing.T) {
			if _, err := azeventhubs.ParseConnectionString(c.s); err != nil {
				t.Fatalf("the SDK refuses it too (%v): not a case of this test", err)
			}
			_, err := EventHubs(c.s)
			checkRefused(t, err, c.want)
		})
	}
	postgres := []struct{ name, s string }{
		{"pool setting not a number", "postgres://app:" + secretMark + "@db/app?pool_max_conns=ten"},
		{"pool setting out of range", "host=db user=app password=" + secretMark + " pool_max_conns=0"},
		{"pool duration not a duration", "postgres://app:" + secretMark + "@db/app?pool_max_conn_lifetime=1hour"},
	}
	for _, c := range postgres {
		t.Run("postgres/"+c.name, func(t *testing.T) {
			// The connection's own parser (validate's before) takes it.
			if _, err := pgx.ParseConfig(c.s); err != nil {
				t.Fatalf("pgx.ParseConfig refuses it too (%v): not a case of this test", err)
			}
			_, err := Postgres(c.s)
			checkRefused(t, err, "not a valid PostgreSQL connection string")
		})
	}
}

func checkRefused(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("accepted, want an error with %q", want)
	case !strings.Contains(err.Error(), want):
		t.Errorf("error %q, want it to say %q", err, want)
	case strings.Contains(err.Error(), secretMark):
		t.Errorf("error %q shows the key", err)
	}
}

// TestAcceptsWellFormed: the strings users copy from the portal, Azurite's
// well-known account, a SAS, and the emulator's string all pass.
func TestAcceptsWellFormed(t *testing.T) {
	for _, s := range []string{
		"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0;EndpointSuffix=core.windows.net",
		"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
		"BlobEndpoint=https://acct.blob.core.windows.net/;SharedAccessSignature=sv=2022-11-02&ss=b&sig=abc%3D",
		"AccountName=acct;SharedAccessSignature=sv=2022-11-02&sig=abc",
	} {
		if err := Storage(s); err != nil {
			t.Errorf("storage: %v", err)
		}
	}
	for _, s := range []string{
		"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=a2V5PQ==;EntityPath=orders",
		"Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders;UseDevelopmentEmulator=true",
		"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessSignature=SharedAccessSignature sr=x&sig=y&se=1&skn=k",
	} {
		if _, err := EventHubs(s); err != nil {
			t.Errorf("eventhubs: %v", err)
		}
	}
	for _, s := range []string{"postgres://app:pw@db:5432/app?sslmode=disable&pool_max_conns=4", "host=db dbname=app"} {
		if _, err := Postgres(s); err != nil {
			t.Errorf("postgres: %v", err)
		}
	}
}

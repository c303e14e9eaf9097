// Package connstr is the one parser of each connection-string kind ehsink
// takes: Event Hubs (source.connection), Azure Storage
// (checkpoint.blob.connection, a Blob sink's blob.connection) and
// PostgreSQL (a postgres sink's dsn), and the one place a Blob container's
// client is built from a connection string or an account URL with Entra
// ID ([Blob], [BlobContainer]). `validate` and `run` both call it,
// and run builds its clients from what it returns, so validate refuses
// exactly the strings run would. Errors never quote the string: it holds a
// key.
//
// The SDKs' own parsers are lenient where a mistake is easy to make: the
// storage parser takes an empty AccountKey or SharedAccessSignature (and
// builds a client without credentials, refused by the service on every
// call), the Event Hubs parser an empty SharedAccessKey. A connector built
// from such a string starts, then retries a refused request forever; these
// parsers refuse it before anything starts.
package connstr

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/jackc/pgx/v5/pgxpool"
)

const eventHubsWant = "want Endpoint=sb://NAMESPACE/;SharedAccessKeyName=NAME;SharedAccessKey=KEY, optionally ;EntityPath=HUB"

// EventHubs parses an Event Hubs connection string with the SDK's own
// parser, the one its clients run, and refuses what that parser lets
// through but no namespace accepts: an empty key, key name, signature or
// EntityPath.
func EventHubs(s string) (azeventhubs.ConnectionStringProperties, error) {
	props, err := azeventhubs.ParseConnectionString(s)
	if err != nil {
		return props, fmt.Errorf("not a valid Event Hubs connection string (%s)", eventHubsWant)
	}
	for _, f := range []struct {
		key string
		v   *string
	}{
		{"SharedAccessKeyName", props.SharedAccessKeyName},
		{"SharedAccessKey", props.SharedAccessKey},
		{"SharedAccessSignature", props.SharedAccessSignature},
		{"EntityPath", props.EntityPath},
	} {
		if f.v != nil && *f.v == "" {
			return props, fmt.Errorf("not a valid Event Hubs connection string: %s is empty (%s)", f.key, eventHubsWant)
		}
	}
	return props, nil
}

const storageWant = "want AccountName and a base64 AccountKey, or BlobEndpoint and SharedAccessSignature"

// Storage checks a storage account connection string as [ContainerClient]
// does (building a client does no I/O).
func Storage(s string) error {
	_, err := ContainerClient(s, "c", nil)
	return err
}

// ContainerClient builds the client of a Blob container from a storage
// account connection string: every Blob client ehsink runs (checkpoint
// stores, Parquet to Blob) is built here. Beyond the SDK's parser it
// refuses an empty value of a key that carries one (AccountName,
// AccountKey, SharedAccessSignature), an AccountKey that is not base64, a
// BlobEndpoint that is not an http(s) URL and a DefaultEndpointsProtocol
// other than http or https.
func ContainerClient(s, containerName string, opts *container.ClientOptions) (*container.Client, error) {
	if err := checkStorage(s); err != nil {
		return nil, fmt.Errorf("not a valid storage connection string: %w (%s)", err, storageWant)
	}
	c, err := container.NewClientFromConnectionString(s, containerName, opts)
	if err != nil {
		// The SDK's messages can quote the string: say what is expected.
		return nil, fmt.Errorf("not a valid storage connection string (%s; the SDK's parser refused it)", storageWant)
	}
	return c, nil
}

// checkStorage is what ContainerClient checks before the SDK parses s. Its
// errors name keys, never values.
func checkStorage(s string) error {
	kv := map[string]string{}
	for part := range strings.SplitSeq(strings.TrimRight(s, ";"), ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || k == "" {
			return errors.New("each part is KEY=VALUE, separated by ';'")
		}
		kv[k] = v
	}
	for _, k := range []string{"AccountName", "AccountKey", "SharedAccessSignature", "BlobEndpoint"} {
		if v, ok := kv[k]; ok && v == "" {
			return fmt.Errorf("%s is empty", k)
		}
	}
	if key, ok := kv["AccountKey"]; ok {
		if _, err := base64.StdEncoding.DecodeString(key); err != nil {
			return errors.New("AccountKey is not base64")
		}
	}
	if p, ok := kv["DefaultEndpointsProtocol"]; ok && p != "http" && p != "https" {
		return errors.New("DefaultEndpointsProtocol must be http or https")
	}
	if e, ok := kv["BlobEndpoint"]; ok {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("BlobEndpoint must be an http(s) URL, such as https://ACCOUNT.blob.core.windows.net")
		}
	}
	_, name := kv["AccountName"]
	_, key := kv["AccountKey"]
	_, sas := kv["SharedAccessSignature"]
	switch {
	case key && !name:
		return errors.New("AccountKey needs AccountName")
	case !(name && key) && !sas:
		return errors.New("no credential: give AccountName and AccountKey, or SharedAccessSignature")
	}
	return nil
}

// Postgres parses a PostgreSQL connection string (a URL or key=value
// keywords) with the parser the sink's pool runs, so that a pool setting
// in the string (pool_max_conns=...) is checked too.
func Postgres(dsn string) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn's parse errors are best-effort redacted and may echo
		// the password of a malformed string: say what is expected.
		return nil, errors.New("not a valid PostgreSQL connection string (want postgres://user:password@host:port/db?sslmode=... or host=... dbname=... keywords)")
	}
	return pc, nil
}

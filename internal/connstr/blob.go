package connstr

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

const accountURLWant = "want the account's Blob endpoint, https://ACCOUNT.blob.core.windows.net"

// AccountURL checks the Blob endpoint of an account reached with Entra
// ID: https://ACCOUNT.blob.core.windows.net (or another cloud's), without
// a container or a query. A loopback host may carry the account as its
// path, as the storage emulator's endpoints do
// (https://127.0.0.1:10000/devstoreaccount1).
func AccountURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return errors.New(accountURLWant)
	}
	if strings.Trim(u.Path, "/") != "" && !loopback(u.Hostname()) {
		return fmt.Errorf("%s, without a container: the container is a setting of its own", accountURLWant)
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Blob checks how a Blob container is reached: exactly one of a storage
// connection string and an account URL. It returns the field the problem
// is in ("connection" or "account_url") with the problem, or "" and nil.
func Blob(connection, accountURL string) (field string, err error) {
	switch {
	case connection == "" && accountURL == "":
		return "connection", errors.New("required: a storage connection string, or account_url to use Entra ID")
	case connection != "" && accountURL != "":
		return "account_url", errors.New("set either connection or account_url, not both")
	case connection != "":
		if err := Storage(connection); err != nil {
			return "connection", err
		}
	default:
		if err := AccountURL(accountURL); err != nil {
			return "account_url", err
		}
	}
	return "", nil
}

// BlobContainer builds the client of a Blob container reached as [Blob]
// checks it (and refuses what Blob refuses): with the storage connection
// string connection, or at accountURL with Entra ID, cred, or when cred is
// nil azidentity's DefaultAzureCredential (environment, workload identity,
// managed identity, then the Azure CLI's login). It does no I/O: a missing
// identity shows at the first request. Errors name the field.
func BlobContainer(connection, accountURL, containerName string, cred azcore.TokenCredential, opts *container.ClientOptions) (*container.Client, error) {
	if field, err := Blob(connection, accountURL); err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	if connection != "" {
		c, err := ContainerClient(connection, containerName, opts)
		if err != nil {
			return nil, fmt.Errorf("connection: %w", err)
		}
		return c, nil
	}
	if cred == nil {
		var err error
		if cred, err = azidentity.NewDefaultAzureCredential(nil); err != nil {
			return nil, fmt.Errorf("account_url: Entra ID credential: %w", err)
		}
	}
	c, err := container.NewClient(strings.TrimSuffix(accountURL, "/")+"/"+containerName, cred, opts)
	if err != nil {
		return nil, fmt.Errorf("account_url: %w", err)
	}
	return c, nil
}

package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

// TestAzuriteOAuthTakesManagedIdentityTokens: azidentity's
// DefaultAzureCredential, pointed at ManagedIdentity, gets a token that an
// HTTPS Azurite from NewAzuriteOAuth accepts, and Azurite refuses a token
// for another audience, so a client that sends no valid token fails.
func TestAzuriteOAuthTakesManagedIdentityTokens(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	az := NewAzuriteOAuth(t)
	env, issued := ManagedIdentity(t)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	opts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: az.HTTPClient(t)}}
	cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{ClientOptions: azcore.ClientOptions{Transport: az.HTTPClient(t)}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClient(az.BlobEndpoint()+"/"+az.ContainerName(t), cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, nil); err != nil {
		t.Fatalf("create with a managed identity's token: %v", err)
	}
	if issued("https://storage.azure.com") == 0 {
		t.Fatal("the managed identity endpoint issued no token for storage")
	}
	wrong, err := container.NewClient(az.BlobEndpoint()+"/"+az.ContainerName(t), Credential("https://vault.azure.net"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Create(ctx, nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("create with a token for another audience: %v, want 403", err)
	}
}

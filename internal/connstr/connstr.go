// Package connstr is the one parser of each connection-string kind ehsink
// takes: Event Hubs (source.connection) and Azure Storage
// (checkpoint.blob.connection, a Parquet sink's blob.connection).
// `validate` and `run` both call it, so validate refuses exactly the
// strings run would. Errors never quote the string: it holds a key.
package connstr

import (
	"errors"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
)

// EventHubs parses an Event Hubs connection string with the SDK's own
// parser, the one its clients run.
func EventHubs(s string) (azeventhubs.ConnectionStringProperties, error) {
	props, err := azeventhubs.ParseConnectionString(s)
	if err != nil {
		return props, errors.New("not a valid Event Hubs connection string (want Endpoint=sb://NAMESPACE/;SharedAccessKeyName=NAME;SharedAccessKey=KEY, optionally ;EntityPath=HUB)")
	}
	return props, nil
}

// Storage checks a storage account connection string with the parser the
// SDK's blob clients run (building a client does no I/O).
func Storage(s string) error {
	if _, err := azblob.NewClientFromConnectionString(s, nil); err != nil {
		return errors.New("not a valid storage connection string (want AccountName and a base64 AccountKey, or BlobEndpoint and SharedAccessSignature; the parser run uses refused it)")
	}
	return nil
}
